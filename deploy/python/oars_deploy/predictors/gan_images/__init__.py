"""``gan_images``: GAN generators, whose deploy.yaml has a ``gan`` section.

Validation: :func:`oars_deploy.predictors.gan_images.config.validate_gan` (and an image input for image models, no
steps for noise
models). Run: :func:`oars_deploy.predictors.gan_images.cli.run_gan` (noise models: samples and grid.png; image
models: output and
pair pictures), one :class:`~.records.GANImagesRecord` per sample or image. Flags: ``--attrs``,
``--src-attrs``, ``--seed``, ``--num``, ``--label``; noise models take no ``-i``.
"""

from __future__ import annotations

import argparse

from oars_deploy.deploy_config import validate_image_input
from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.plugins import PredictorPlugin, PredictorRun, add_flag, register_predictor
from oars_deploy.records import ResultRecord


@register_predictor("gan_images")
class GANImages(PredictorPlugin):
    """Generated or translated pictures (see the module docstring)."""

    section = "gan"
    describes = "GAN generators"
    needs_input = False  # noise generators read nothing

    def validate(self, deploy: dict, path: str) -> None:
        """The ``gan`` section; an image input for image models; no pre-processing for noise models."""
        from oars_deploy.predictors.gan_images.config import validate_gan

        validate_gan(deploy, path)
        if deploy["gan"]["kind"] != "noise":
            validate_image_input(deploy, path)
        elif deploy["preprocess"]:
            raise DeployError(f"{path}: preprocess of a noise generator must be empty, got {deploy['preprocess']!r}")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The generator flags."""
        add_flag(parser, "--attrs", default=None, help="GAN attribute models: targets, e.g. Black_Hair=1,Male=0")
        add_flag(parser, "--src-attrs", default=None, help="STGAN: the source image's attributes (default all 0)")
        add_flag(parser, "--seed", type=int, default=0, help="noise GANs: the noise seed (default 0)")
        add_flag(parser, "--num", type=int, default=None, help="noise GANs: how many images (default 16)")
        add_flag(parser, "--label", type=int, default=None, help="CGAN: the class id (default: a sweep of classes)")

    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """:func:`oars_deploy.predictors.gan_images.cli.run_gan` with its failures and records collected."""
        from oars_deploy.predictors.gan_images.cli import run_gan

        failures = Failures()
        results: list[ResultRecord] = []
        run_gan(args, failures=failures, results=results)
        total = 0 if args.input is None else len(list_images(args.input))
        return PredictorRun(records=results, failures=failures, total=total)

    def served_model(self) -> type:
        """:class:`~.served.GANModel` (``oars-serve`` only: its records carry the pictures)."""
        from oars_deploy.predictors.gan_images.served import GANModel

        return GANModel
