"""tools/infer.py for GAN configs: the deployed predictor's outputs, computed with PyTorch.

The checkpoint takes the export's place in the runtime's own loop (:func:`oars_deploy.predictors.gan_images.cli.
run_gan`): :class:`TorchGANPredictor` runs the module the export would trace (:class:`gan.export.GeneratorGraph`: the
EMA generator when present, normalisation and denormalisation around it) on the numbers the runtime feeds it
(deploy.yaml's resize and RGB steps, numpy-seeded noise, ``--attrs`` parsed by the same function), so tools/infer.py
and oars-infer write the same files and results.jsonl records by the same code, image by image.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from mmengine.config import Config

from gan.export import build_export_spec, export_options, preprocess_steps
from oars.inference import check_output_folder
from oars.pipelines.model import init_model
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.predictors.gan_images.cli import run_gan
from oars_deploy.predictors.gan_images.predictor import GANPredictor
from oars_deploy.records import write_results

BATCH = 8  # generator calls of at most this many samples (the last chunk padded, its extra rows dropped)


class TorchGANPredictor(GANPredictor):
    """A checkpoint in the runtime :class:`GANPredictor`'s role: its ``generate`` / ``translate`` feed the graph
    module the export would trace (:class:`gan.export.GeneratorGraph`: the EMA generator when present,
    normalisation around it) with deploy.yaml's pre-processing, so ``tools/infer.py`` and ``oars-infer`` on its
    export compute the same numbers.

    Args:
        model: the GAN (eval mode) with its weights. cfg: its config. device: where ``model`` is.
    """

    def __init__(self, model: torch.nn.Module, cfg: Config, device: str = "cpu") -> None:
        spec = build_export_spec(model, cfg, export_options(cfg))
        self.gan: dict = spec.deploy_sections["gan"]
        self.kind = self.gan["kind"]
        self.input_names = list(spec.graph_inputs)
        self.batch_size = BATCH
        self.output_name = "image"
        # deploy.yaml's resize and RGB steps (image models only: a noise model has no input size)
        self.deploy = {"preprocess": preprocess_steps(cfg, self.gan["input_size"]) if "input_size" in self.gan
                       else []}
        module = spec.module

        def backend(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            with torch.no_grad():
                out = module(*[torch.from_numpy(np.ascontiguousarray(feeds[n])).to(device)
                               for n in self.input_names])
            return {self.output_name: out.cpu().numpy()}

        self.backend = backend


def run_inference(cfg: Config, checkpoint: str, inputs: str | None, out_dir: str, device: str = "cpu",
                  failures: Failures | None = None, attrs: str | None = None, src_attrs: str | None = None,
                  seed: int = 0, num: int | None = None, label: int | None = None) -> list[str]:
    """Generate (noise models: ``seed``/``num``/``label``; ``inputs`` must be None) or translate every image under
    ``inputs`` (``attrs``/``src_attrs`` as ``"Black_Hair=1,Male=0"`` for attribute models); returns the written
    paths (noise: ``sample_XXX.png`` + ``grid.png``; images: ``<stem>.png`` + ``<stem>_pair.png``); also writes
    ``results.jsonl`` (one ``oars_deploy.records.GANImagesRecord`` per sample / image, as oars-infer does).

    The files are written by the runtime's own loop (:func:`oars_deploy.predictors.gan_images.cli.run_gan`) with
    the checkpoint as its generator (:class:`TorchGANPredictor`): the same names (``x_png`` / ``x_jpg`` for
    ``x.png`` beside ``x.jpg``; a name that still collides is refused before any image is read), the same flag
    checks and the same records as ``oars-infer``.

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised after everything readable was written.
    """
    check_output_folder(out_dir, inputs)
    model = init_model(cfg, checkpoint, device)
    args = argparse.Namespace(input=inputs, output_dir=out_dir, attrs=attrs, src_attrs=src_attrs, seed=seed,
                              num=num, label=label, batch_size=None, draw_threshold=None)
    own = failures is None
    failures = Failures() if own else failures
    results: list = []
    written = run_gan(args, failures=failures, results=results, predictor=TorchGANPredictor(model, cfg, device))
    write_results(results, out_dir)
    if own and inputs is not None:
        failures.raise_if_any(total=len(list_images(inputs)))
    return written
