"""The GAN task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point ``gan``:
the generator's export (several named graph inputs: noise + label, image + attributes) through
:func:`gan.export.export_model`, inference through :mod:`gan.apis` and its ``tools/infer.py`` flags (``--attrs``,
``--src-attrs`` for attribute editors; ``--seed``, ``--num``, ``--label`` for noise models, which take no ``-i``).
Everything heavy is imported inside the methods.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from oars.tasks import ArgumentContainer, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions
    from oars_deploy.failures import Failures

INFER_FLAGS = ("attrs", "src_attrs", "seed", "num", "label")


class GANTask(Task):
    """Image generation and image-to-image translation (DCGAN, CGAN, Pix2Pix, CycleGAN, StarGAN, AttGAN, STGAN)."""

    scope = "gan"

    def import_registries(self) -> None:
        """Creates the ``gan`` child registries."""
        import gan.registry  # noqa: F401

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """:func:`gan.export.export_options` (the generator's batch and image size)."""
        from gan.export import export_options

        return export_options(cfg, dynamic=dynamic, opset=opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """:func:`gan.export.preprocess_steps` (the image inputs' steps; none are used by noise models)."""
        from gan.export import preprocess_steps

        return preprocess_steps(cfg)

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions):  # -> GANExport
        """:func:`gan.export.build_export_spec`: a ``GANExport`` (the ExportSpec plus the graph's input names);
        the export itself runs in :meth:`export_model`, as the graph has several inputs."""
        from gan.export import build_export_spec

        return build_export_spec(model, cfg, options)

    def export_model(self, cfg: Config, checkpoint: str, out_dir: str, *, fmt: str, dynamic: bool, opset: int,
                     half: bool, int8: bool, check: bool, device: str, overwrite: bool) -> dict:
        """:func:`gan.export.export_model`: the multi-input graph, its self-check and deploy.yaml (``gan``
        section)."""
        from gan.export import export_model

        return export_model(cfg, checkpoint, out_dir, fmt=fmt, dynamic=dynamic, opset=opset, half=half, int8=int8,
                            check=check, device=device, overwrite=overwrite)

    def infer_arguments(self, parser: ArgumentContainer) -> None:
        """``--attrs``, ``--src-attrs``, ``--seed``, ``--num``, ``--label``."""
        parser.add_argument("--attrs", default=None,
                            help="GAN attribute editors: target attributes, e.g. Male=1,Young=0")
        parser.add_argument("--src-attrs", default=None, help="STGAN: the source image's attributes (same form)")
        parser.add_argument("--seed", type=int, default=None, help="noise GANs: seed of the first sample (default 0)")
        parser.add_argument("--num", type=int, default=None, help="noise GANs: number of samples")
        parser.add_argument("--label", type=int, default=None, help="CGAN: class of every sample (default: cycle)")

    def requires_input(self, cfg: Config) -> bool:
        """False: noise models take no ``-i``; :func:`gan.apis.run_inference` checks the input fits the model."""
        return False

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`gan.apis.run_inference` with the GAN flags that were given."""
        from gan.apis import run_inference

        extra = {name: getattr(args, name) for name in INFER_FLAGS if getattr(args, name, None) is not None}
        return run_inference(cfg, weights, inputs, output, device=device, failures=failures, **extra)


TASK = GANTask()
