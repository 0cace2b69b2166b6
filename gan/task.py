"""The GAN task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point ``gan``:
one kind of model, the generator, exported (several named graph inputs: noise + label, image + attributes) through
the core exporter with :func:`gan.export.build_export_spec`, predicting through :mod:`gan.apis` with its
``tools/infer.py`` flags (``--attrs``, ``--src-attrs`` for attribute editors; ``--seed``, ``--num``, ``--label`` for
noise models, which take no ``-i``); its ``tools/demo_data.py`` sets are in :mod:`gan.commands`. Everything heavy
is imported inside the methods.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from gan.commands import GANCommands
from oars.tasks import ArgumentContainer, Data, Exporter, ModelKind, Predictor, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures

INFER_FLAGS = ("attrs", "src_attrs", "seed", "num", "label")


class GANData(Data):
    """Browse pictures of GAN datasets."""

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> object:
        """:func:`gan.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from gan.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)


class GANExporter(Exporter):
    """The generator's export and its evaluation with ``--model-dir``."""

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions:
        """:func:`gan.export.export_options` (the generator's batch and image size)."""
        from gan.export import export_options

        return export_options(cfg, dynamic=dynamic, opset=opset)

    def preprocess_steps(self, cfg: Config) -> list[dict]:
        """:func:`gan.export.preprocess_steps` (the image inputs' steps; none are used by noise models)."""
        from gan.export import preprocess_steps

        return preprocess_steps(cfg)

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`gan.export.build_export_spec`: the generator graph with its named inputs (noise + label, image +
        attributes), its sample feeds and deploy.yaml's ``gan`` section, exported by the core like every task."""
        from gan.export import build_export_spec

        return build_export_spec(model, cfg, options)

    def check_export(self, cfg: Config, fmt: str, precision: str) -> None:
        """FP32 only, to ONNX and the edge formats: a generator's output is a picture, not scores an FP16/INT8 graph
        could be checked to agree on, and no TensorRT engine of a generator has been built and checked."""
        from oars.export.errors import ExportError
        from oars.export.formats import FORMATS

        where = getattr(cfg, "filename", None) or "config"
        if fmt == "tensorrt":
            raise ExportError(f"{where}: GAN generators export to --format {', '.join(['onnx', *FORMATS])}, not "
                              "tensorrt (no TensorRT engine of a generator has been built and checked)")
        if precision != "fp32":
            raise ExportError(f"{where}: --half / --int8 are not supported for GAN generators yet (their output "
                              "is an image, not scores to agree on); export FP32")

    # ------------------------------------------------------------------ tools/eval.py --model-dir on a generator
    evaluates_exports = True

    def export_predictor(self, model_dir: str, device: str, backend: str, model_cfg: dict | None = None) -> Any:
        """:class:`gan.export_eval.ExportedGenerator`: the config's model predicting with the export's graph in
        place of its generator (noise, source halves and target attributes chosen as in a PyTorch evaluation)."""
        from gan.export_eval import ExportedGenerator
        from oars.errors import OarsError

        if not model_cfg:
            raise OarsError("tools/eval.py --model-dir: a GAN export is evaluated inside its config's model "
                            "section (noise, targets and real copies come from it); the config has none")
        return ExportedGenerator(model_dir, model_cfg, device=device, backend=backend)

    def export_inputs(self, samples: list[Any], inputs: Any = None) -> list[dict]:
        """Per sample ``{'inputs': {key: value}, 'sample': sample}``: the batch's packed inputs (images uint8
        [C, H, W], labels, attributes), split per sample for :meth:`ExportedGenerator.predict`."""
        from oars.errors import OarsError

        if not isinstance(inputs, dict):
            raise OarsError(f"tools/eval.py --model-dir: a GAN test batch must pack its inputs as a dict (GAN "
                            f"pipelines end in PackGANInputs), got {type(inputs).__name__}")
        return [{"inputs": {k: v[i] for k, v in inputs.items()}, "sample": s} for i, s in enumerate(samples)]

    def prediction_from_export(self, result: Any, sample: Any) -> None:
        """The predicted sample's fields (``fake_img`` float32 [3, H, W] 0..255 and the real copies, target
        attributes...) copied into the test sample, when they are two objects."""
        if result is sample:
            return
        for key in result.keys():
            sample.set_field(result.get(key), key)
        for key in result.metainfo_keys():
            sample.set_metainfo({key: result.metainfo[key]})


class GANPredictor(Predictor):
    """``tools/infer.py`` and ``oars.Model.predict`` (image-to-image generators) for GANs."""

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

    def predict(self, model: torch.nn.Module, cfg: Config, inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``gan_images`` for image-to-image generators (pix2pix): per input ``image`` (the output, BGR uint8),
        ``picture`` (input as the model saw it | output: ``<stem>_pair.png``) and ``record``, computed as
        :func:`gan.apis.run_inference` computes them. Noise and attribute models are refused (tools/infer.py)."""
        import os.path as osp

        from gan.apis.inference import TorchGANPredictor
        from oars.api.arrays import check_image_array
        from oars.errors import OarsError
        from oars_deploy.outputs import read_image
        from oars_deploy.predictors.gan_images.cli import translation_record
        from oars_deploy.predictors.gan_images.config import side_by_side

        generator = TorchGANPredictor(model, cfg, str(next(model.parameters()).device))
        if generator.kind == "noise" or generator.input_names != ["image"]:
            raise OarsError(f"{cfg.filename}: oars.Model.predict translates images with image-to-image generators; "
                            "use tools/infer.py for noise models (--seed/--num) and attribute models (--attrs)")
        results = []
        for name, array in inputs:
            image = read_image(name) if array is None else check_image_array(array, name)
            (shown,), (out,) = generator.translate([image])
            stem = osp.splitext(osp.basename(name))[0]
            results.append({"image": out, "picture": side_by_side(shown, out),
                            "record": translation_record(name, [f"{stem}.png", f"{stem}_pair.png"], None, None,
                                                         generator.gan)})
        return "gan_images", results


class GANTask(Task):
    """Image generation and image-to-image translation (DCGAN, CGAN, Pix2Pix, CycleGAN, StarGAN, AttGAN, STGAN)."""

    scope = "gan"
    kinds = (ModelKind("generator", GANExporter(), GANPredictor(), GANData()),)
    commands = GANCommands()

    def import_registries(self) -> None:
        """Creates the ``gan`` child registries."""
        import gan.registry  # noqa: F401


TASK = GANTask()
