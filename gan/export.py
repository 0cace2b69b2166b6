"""Export a GAN's generator (the EMA one when the model has ``generator_ema``) to ONNX with deploy.yaml.

The graph is the model's ``mode='tensor'`` forward (:meth:`BaseGAN.export_forward`) with the data preprocessor's
normalisation and its inverse inside, so a deployed predictor feeds plain numbers and gets plain pictures:

- noise models (DCGAN, CGAN): ``noise`` float32 [N, z] (+ ``label`` int64 [N]) -> ``fake_img`` float32 [N, 3, H, W]
  RGB 0..255;
- image models (Pix2Pix, CycleGAN): ``image`` float32 [N, 3, H, W] RGB 0..255 -> ``fake_img``;
- attribute models (StarGAN, AttGAN; STGAN also ``src_attrs``): ``image`` + ``attrs`` float32 [N, K] 0/1
  -> ``fake_img``.

The graph inputs are whatever ``model.export_inputs(batch, img_size)`` names (``img`` is called ``image`` in the
graph), so a new generator exports without a change here. The export itself is the core's
(``oars.pipelines.export.export_model``, as for every task): :func:`build_export_spec` gives it the module, the
named graph inputs, the self-check's sample feeds (:func:`sample_feeds`) and deploy.yaml's ``gan`` section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from oars.export.check import synthetic_image
from oars.export.errors import ExportError
from oars.export.guards import DEFAULT_OPSET
from oars.export.spec import ExportOptions, ExportSpec
from oars_deploy.predictors.gan_images.config import ATTR_ENCODING, GAN_KEY, STGAN_RULE, to_bgr_images  # noqa: F401 (re-export)
from oars_deploy.preprocess import preprocess_one

GRAPH_NAMES = {"img": "image"}  # model input key -> graph input name (the rest keep their names)
OUTPUT_NAME = "fake_img"  # the data-sample field; not ``image``: ONNX refuses an output named like an input
DEFAULT_IMG_SIZE = 256
PREDICTOR = "gan_images"  # the runtime plug-in that runs a generator export (oars_deploy.predictors.gan_images)


class GeneratorGraph(nn.Module):
    """``forward(*inputs)`` in ``model_keys`` order: images 0..255 -> normalised, the model's ``export_forward``,
    its [-1, 1] output -> float32 0..255 clamped (``GANDataPreprocessor.destruct``), all traced into the graph."""

    def __init__(self, model: nn.Module, model_keys: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.model_keys = list(model_keys)
        pre = model.data_preprocessor
        mean = getattr(pre, "mean", None)
        std = getattr(pre, "std", None)
        self.register_buffer("mean", (mean if mean is not None else torch.zeros(1)).float().reshape(1, -1, 1, 1))
        self.register_buffer("std", (std if std is not None else torch.ones(1)).float().reshape(1, -1, 1, 1))
        self.bgr_to_rgb = bool(getattr(pre, "bgr_to_rgb", False))

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        inputs = {}
        for key, value in zip(self.model_keys, tensors):
            if key == "img":
                value = value.flip(1) if self.bgr_to_rgb else value
                value = (value - self.mean) / self.std
            inputs[key] = value
        out = self.model.export_forward(inputs).float()
        out = out * self.std + self.mean
        return (out.flip(1) if self.bgr_to_rgb else out).clamp(0.0, 255.0)


def export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """``cfg.export`` (optional for GANs): ``input_shape: [B, 3, H, W]`` (image models' input; B the export
    batch) or ``batch`` alone; without a section: batch 1 and the model's default image size."""
    export = dict(cfg.get("export") or {})
    shape = export.get("input_shape")
    if shape is not None:
        if not isinstance(shape, (list, tuple)) or len(shape) != 4 or not all(isinstance(v, int) and v > 0
                                                                                 for v in shape):
            raise ExportError(f"{cfg.filename}: export.input_shape must be [B, 3, H, W] positive ints, got {shape!r}")
        input_shape = tuple(int(v) for v in shape)
    else:
        batch = export.get("batch", 1)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ExportError(f"{cfg.filename}: export.batch must be a positive int, got {batch!r}")
        input_shape = (batch, 3, 0, 0)  # 0: the model's default image size
    extra = {k: v for k, v in export.items() if k not in ("input_shape", "batch")}
    return ExportOptions(input_shape=input_shape, dynamic=dynamic, opset=int(opset), extra=extra)


def preprocess_steps(cfg: Config, img_size: Sequence[int] | None = None) -> list[dict]:
    """deploy.yaml steps of an image input: resize to the graph's [H, W], BGR -> RGB as float 0..255 (the graph
    normalises), HWC -> NCHW. ``img_size`` None (noise models): no steps."""
    if not img_size:
        return []
    h, w = int(img_size[0]), int(img_size[1])
    return [{"type": "Resize", "size": [w, h], "keep_ratio": False, "interpolation": "linear"},
            {"type": "Normalize", "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "to_rgb": True},
            {"type": "Permute"}]


def build_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The generator graph of ``model`` (a BaseGAN) and its deploy.yaml description (see the module docstring).

    Returns:
        The core's :class:`ExportSpec`: ``input_names`` the graph inputs in the module's argument order (``noise``,
        ``label``; ``image``, ``attrs``, ...), ``sample_inputs`` :func:`sample_feeds`, ``preprocess`` the image
        steps at the generator's input size, ``labels`` the class or attribute names, predictor ``gan_images``.
    """
    if not hasattr(model, "export_inputs"):
        raise ExportError(f"{cfg.filename}: {type(model).__name__} has no export_inputs(); GAN export needs a "
                          "BaseGAN model")
    batch, h, w = options.input_shape[0], options.input_shape[2], options.input_shape[3]
    examples = model.export_inputs(batch, (h, w)) if h and w else model.export_inputs(batch)
    keys = list(examples)
    names = [GRAPH_NAMES.get(k, k) for k in keys]
    kind = "image_attrs" if "attrs" in keys else "image" if "img" in keys else "noise" if "noise" in keys else None
    if kind is None:
        raise ExportError(f"{type(model).__name__}.export_inputs gives {keys}; expected noise, img or img + attrs")
    module = GeneratorGraph(model, keys).eval()
    with torch.no_grad():
        out = module(*[examples[k].to(_device(model)) for k in keys])
    out_hw = [int(out.shape[2]), int(out.shape[3])]
    dyn = -1 if options.dynamic else batch
    inputs = [{"name": n, "shape": [dyn, *[int(v) for v in examples[k].shape[1:]]],
               "dtype": "int64" if examples[k].dtype == torch.long else "float32"} for n, k in zip(names, keys)]
    section: dict[str, Any] = {"kind": kind, "inputs": inputs, "output_size": out_hw}
    if "img" in keys:
        section["input_size"] = [int(v) for v in examples["img"].shape[2:]]
    if "noise" in keys:
        section["z_dim"] = int(examples["noise"].shape[1])
    if "label" in keys:
        section["num_classes"] = int(model.num_classes)
        section["class_names"] = _class_names(cfg, model)
    if "attrs" in keys:
        section["attr_names"] = [str(a) for a in getattr(model, "attr_names", [])] or [
            f"attr_{i}" for i in range(int(examples["attrs"].shape[1]))]
        section["attr_encoding"] = ATTR_ENCODING
        if "src_attrs" in keys:
            section["attr_rule"] = STGAN_RULE
    first = inputs[names.index("image")] if "image" in names else inputs[0]
    deploy_input = {"name": first["name"], "shape": first["shape"], "dtype": first["dtype"],
                    "layout": "NCHW" if first["name"] == "image" else "NC",
                    "color": "RGB" if first["name"] == "image" else "none",
                    "dynamic_axes": {0: "batch"} if options.dynamic else {}}
    labels = section.get("class_names") or section.get("attr_names") or ["image"]

    def sample_inputs(batch: int, seed: int) -> tuple[tuple[torch.Tensor, ...], dict[str, np.ndarray], float]:
        feeds = sample_feeds(section, batch, seed)
        device = _device(model)
        # both sides get the same deploy-preprocessed arrays: no second pre-processing path to compare
        return tuple(torch.from_numpy(feeds[n]).to(device) for n in names), feeds, 0.0

    return ExportSpec(
        module=module, input_name=first["name"], input_names=names, output_names=[OUTPUT_NAME],
        outputs=[{"name": OUTPUT_NAME, "shape": [dyn, 3, *out_hw], "dtype": "float32",
                  "meaning": "generated images, RGB, 0..255 (denormalised in the graph)"}],
        postprocess={"type": "gan_image", "range": [0, 255], "color": "RGB", "layout": "NCHW",
                     "in_graph": "input normalisation, generator (EMA when trained with it), denormalisation"},
        atol=1e-4, deploy_input=deploy_input, deploy_sections={GAN_KEY: section}, sample_inputs=sample_inputs,
        preprocess=preprocess_steps(cfg, section.get("input_size")), labels=[str(v) for v in labels],
        predictor=PREDICTOR)


def _device(model: nn.Module) -> torch.device:
    return next(iter(model.parameters())).device


def _class_names(cfg: Config, model: nn.Module) -> list[str]:
    from oars.export.labels import dataset_labels

    names = dataset_labels(cfg, model)[0]
    return [str(n) for n in names[:int(model.num_classes)]]


def sample_feeds(section: dict, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic check inputs by graph name for deploy.yaml's ``gan`` ``section``: images are synthetic BGR
    pictures (2H x 3W, another aspect ratio) through deploy.yaml's steps, as a predictor reads them; noise N(0, 1);
    labels a class sweep; attrs 0/1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in section["inputs"]:
        name, tail = spec["name"], spec["shape"][1:]
        if name == "image":
            h, w = section["input_size"]
            steps = preprocess_steps(None, (h, w))
            feeds[name] = np.concatenate([preprocess_one(synthetic_image(2 * h, 3 * w, seed + i), steps)[0][None]
                                          for i in range(batch)])
        elif name == "noise":
            feeds[name] = rng.standard_normal((batch, *tail)).astype(np.float32)
        elif name == "label":
            feeds[name] = ((np.arange(batch) + seed) % section["num_classes"]).astype(np.int64)
        else:  # attrs / src_attrs: 0/1 rows
            feeds[name] = (rng.random((batch, *tail)) < 0.5).astype(np.float32)
    return feeds
