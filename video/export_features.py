"""Export of frame-feature models (``FeatureRecognizer`` with AttentionLSTM / AttentionCluster / NeXtVLAD): one
packed input tensor -> class scores, with deploy.yaml's ``features`` section.

The export core traces a module of ONE input, so the graph takes the feature dict packed:

- input ``features`` float32 [N, T, D_1 + ... + D_k + 1] (layout ``NTD``): the modalities concatenated along the
  last axis in the model's modality order (``head.feature_dims``), then the valid-frame mask (1.0 valid, 0.0
  padding); T = the test pipeline's ``LoadFeatures.max_frames``;
- output ``scores`` float32 [N, C]: sigmoid (multi-label) or softmax (single-label) of the logits, the PyTorch
  model's ``pred_score``.

The module splits the tensor back into ``{modality: [N, T, D], 'mask': bool [N, T]}`` and calls the recognizer in
tensor mode. N is dynamic with ``--dynamic``. The test pipeline must be ``LoadFeatures (test_mode: true) ->
PackFeatureInputs``. The self-check writes synthetic feature files (uint8 and float, shorter and longer than
``max_frames``), runs them through the test pipeline + data preprocessor and through the deployed predictor's own
loading (``oars_deploy.predictors.feature_classes.predictor.feature_input``) and requires the same tensor; it also
requires
the packed graph's scores to equal the model's on the preprocessor's dict (padding to ``max_frames`` changes
nothing).
"""

from __future__ import annotations

import os.path as osp
import pickle
import tempfile

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from oars.export.deploy_config import test_pipeline_cfg
from oars.export.errors import ExportCheckError, ExportError
from oars.export.guards import DEFAULT_OPSET
from oars.export.spec import ExportOptions, ExportSpec

INPUT_NAME, OUTPUT_NAME, LAYOUT = "features", "scores", "NTD"
PREPROCESS_ATOL = 1e-6
PADDING_ATOL = 1e-5
DYNAMIC_TRACE_BATCH = 2  # example batch of a dynamic export written with batch 1 (see feature_export_options)


def is_feature_config(cfg: Config) -> bool:
    """Whether ``cfg`` describes a frame-feature model (a FeatureRecognizer or a LoadFeatures test pipeline)."""
    if str((cfg.get("model") or {}).get("type", "")) == "FeatureRecognizer":
        return True
    try:
        return any(s.get("type") == "LoadFeatures" for s in test_pipeline_cfg(cfg))
    except ExportError:  # no test pipeline: the clip path reports it
        return False


def describe_feature_pipeline(cfg: Config, feature_dims: dict[str, int] | None = None) -> dict:
    """deploy.yaml's ``features`` section from the test pipeline and the model's ``feature_dims``.

    Args:
        cfg: the config (test pipeline: LoadFeatures (test_mode) -> PackFeatureInputs).
        feature_dims: modality -> width in the model's order; None: ``cfg.model.head.feature_dims``.

    Returns:
        ``{'modalities': [{name, dim}], 'max_frames', 'min_quantized_value', 'max_quantized_value'}``.

    Raises:
        ExportError: naming the config and the step or key that cannot be deployed.
    """
    where = cfg.filename
    load: dict | None = None
    pack: dict | None = None
    for i, step in enumerate(test_pipeline_cfg(cfg)):
        kind = step.get("type", "?")
        name = f"{where}: test pipeline step {i} ({kind})"
        if kind == "LoadFeatures":
            if not step.get("test_mode", False):
                raise ExportError(f"{name}: test_mode must be true in the test pipeline (random frame selection "
                                  "cannot be deployed)")
            load = step
        elif kind == "PackFeatureInputs":
            pack = step
        else:
            raise ExportError(f"{name} cannot be expressed in deploy.yaml (a feature model's test pipeline is "
                              "LoadFeatures -> PackFeatureInputs); remove it before exporting")
    if load is None or pack is None:
        raise ExportError(f"{where}: a feature model's test pipeline needs LoadFeatures (test_mode: true) and "
                          "PackFeatureInputs")
    if feature_dims is None:
        feature_dims = dict((cfg.model.get("head") or {}).get("feature_dims") or {})
    if not feature_dims:
        raise ExportError(f"{where}: model.head.feature_dims is missing (modality -> per-frame width)")
    loaded = list(load.get("modalities", ("rgb", "audio")))
    packed = pack.get("modalities")
    for owner, names in (("LoadFeatures.modalities", loaded), ("PackFeatureInputs.modalities", packed)):
        missing = [m for m in feature_dims if names is not None and m not in names]
        if missing:
            raise ExportError(f"{where}: the model takes {list(feature_dims)} but {owner}={list(names)} lacks "
                              f"{missing}")
    max_frames = load.get("max_frames", 300)
    if isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 1:
        raise ExportError(f"{where}: LoadFeatures.max_frames must be a positive int, got {max_frames!r}")
    return {"modalities": [{"name": str(m), "dim": int(d)} for m, d in feature_dims.items()],
            "max_frames": max_frames,
            "min_quantized_value": float(load.get("min_quantized_value", -2.0)),
            "max_quantized_value": float(load.get("max_quantized_value", 2.0))}


def packed_shape(section: dict, batch: int) -> tuple[int, int, int]:
    """The graph input shape [B, max_frames, sum D + 1]."""
    return batch, int(section["max_frames"]), sum(m["dim"] for m in section["modalities"]) + 1


def feature_export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """``ExportOptions`` of a feature model (batch: ``export.input_shape[0]`` or ``export.batch``, default 1; a
    dynamic export traces with at least 2 samples); a written ``export.input_shape`` must be the packed shape."""
    export = dict(cfg.get("export") or {})
    section = describe_feature_pipeline(cfg)
    given = export.get("input_shape")
    batch = int(given[0]) if given else int(export.get("batch", 1))
    if batch < 1:
        raise ExportError(f"{cfg.filename}: the export batch must be >= 1, got {batch}")
    shape = packed_shape(section, batch)
    if given is not None and tuple(int(v) for v in given) != shape:
        raise ExportError(f"{cfg.filename}: export.input_shape={list(given)} but a feature model takes the packed "
                          f"{list(shape)} ([B, max_frames, sum of the modalities' dims + 1 mask channel]); set "
                          f"export.input_shape to {list(shape)} or leave it out")
    if dynamic and batch == 1:
        # torch.export specialises a batch of 1 through nn.LSTM (AttentionLSTM) and the exporter then drops the
        # dynamic axis; the example batch of a dynamic export only drives the trace (deploy.yaml says B = -1)
        shape = packed_shape(section, DYNAMIC_TRACE_BATCH)
    extra = {k: v for k, v in export.items() if k not in ("input_shape", "batch")}
    return ExportOptions(input_shape=shape, dynamic=dynamic, opset=int(opset), extra=extra)


def pack_features(inputs: dict[str, torch.Tensor], modalities: list[str], max_frames: int) -> torch.Tensor:
    """The data preprocessor's feature batch (modality -> [B, T', D], ``mask`` [B, T'], T' <= max_frames) as the
    graph input float32 [B, max_frames, sum D + 1] (zero rows after T')."""
    x = torch.cat([inputs[m].float() for m in modalities] + [inputs["mask"].float().unsqueeze(2)], dim=2)
    if x.shape[1] > max_frames:
        raise ExportCheckError(f"a feature batch of {x.shape[1]} frames is longer than max_frames={max_frames}")
    return torch.nn.functional.pad(x, (0, 0, 0, max_frames - x.shape[1]))


class FeatureRecognizerExport(nn.Module):
    """The traced graph: packed features [N, T, sum D + 1] -> split -> recognizer (tensor mode) -> scores [N, C].

    Args:
        recognizer: a ``FeatureRecognizer``.
    """

    def __init__(self, recognizer: nn.Module) -> None:
        super().__init__()
        self.recognizer = recognizer
        self.modalities = list(recognizer.head.modalities)
        self.dims = [int(recognizer.head.feature_dims[m]) for m in self.modalities]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        parts = torch.split(features[..., :-1], self.dims, dim=2)
        inputs = dict(zip(self.modalities, parts))
        inputs["mask"] = features[..., -1] > 0.5
        return self.recognizer(inputs, None, mode="tensor")


def build_feature_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of a ``FeatureRecognizer`` (see the module docstring)."""
    head = getattr(model, "head", None)
    if head is None or not hasattr(head, "feature_dims"):
        raise ExportError(f"{cfg.filename}: {type(model).__name__} is not a FeatureRecognizer (the test pipeline "
                          "loads features)")
    section = describe_feature_pipeline(cfg, dict(head.feature_dims))
    shape = list(options.input_shape)
    if shape[1:] != list(packed_shape(section, 1)[1:]):
        raise ExportError(f"{cfg.filename}: the export input {shape} does not fit the model's feature_dims "
                          f"{dict(head.feature_dims)} (packed {list(packed_shape(section, shape[0]))})")
    batch = -1 if options.dynamic else shape[0]
    num_classes, multi = int(model.num_classes), bool(head.multi_label)
    activation = "per-class sigmoid" if multi else "softmax over the classes"
    outputs = [{"name": OUTPUT_NAME, "shape": [batch, num_classes], "dtype": "float32",
                "meaning": f"class probabilities: {activation} of the logits (the model's pred_score)"}]
    postprocess = {"type": "classification", "num_classes": num_classes, "multi_label": multi,
                   "output": OUTPUT_NAME, "topk": 5}
    names = " + ".join(f"{m['name']} {m['dim']}" for m in section["modalities"])
    deploy_input = {"name": INPUT_NAME, "shape": [batch] + shape[1:],
                    "dynamic_axes": {0: "batch"} if options.dynamic else {}, "dtype": "float32",
                    "layout": LAYOUT, "color": None,
                    "meaning": f"per frame: {names} features, then the valid-frame mask (1 valid, 0 padding)"}
    module = FeatureRecognizerExport(model).eval()

    def sample(num: int, seed: int = 0) -> tuple[torch.Tensor, np.ndarray, float]:
        return sample_feature_inputs(cfg, model, module, section, num, seed)

    return ExportSpec(module=module, input_name=INPUT_NAME, output_names=[OUTPUT_NAME], outputs=outputs,
                      postprocess=postprocess, atol=1e-4, sample_inputs=sample, deploy_input=deploy_input,
                      deploy_sections={"features": section}, predictor="feature_classes")


# ----------------------------------------------------------------------------- the self-check's input
def write_feature_file(path: str, arrays: dict[str, np.ndarray]) -> str:
    """Write ``arrays`` (modality -> [T, D]) as ``.npz`` or ``.pkl`` (by the suffix); returns ``path``."""
    if path.endswith(".npz"):
        np.savez(path, **arrays)
    else:
        with open(path, "wb") as f:
            pickle.dump(arrays, f)
    return path


def synthetic_feature_files(folder: str, section: dict, loaded: list[str], batch: int, seed: int) -> list[str]:
    """``batch`` feature files under ``folder``: longer than ``max_frames`` (frame selection), shorter (padding) and
    exactly as long, in turn; uint8 ``.npz`` and float32 ``.pkl`` in turn; every modality of ``loaded``."""
    rng = np.random.default_rng(seed)
    t = int(section["max_frames"])
    dims = {m["name"]: m["dim"] for m in section["modalities"]}
    paths = []
    for i in range(batch):
        frames = (2 * t + 3 + i, max(1, t // 2 - i), t)[i % 3]
        quantised = i % 2 == 0
        arrays = {m: (rng.integers(0, 256, (frames, dims.get(m, 4)), dtype=np.uint8) if quantised
                      else rng.normal(0.0, 1.0, (frames, dims.get(m, 4))).astype(np.float32)) for m in loaded}
        paths.append(write_feature_file(osp.join(folder, f"sample_{i}.{'npz' if quantised else 'pkl'}"), arrays))
    return paths


def sample_feature_inputs(cfg: Config, model: nn.Module, module: nn.Module, section: dict, batch: int,
                          seed: int) -> tuple[torch.Tensor, np.ndarray, float]:
    """``batch`` synthetic feature files through the test pipeline + data preprocessor + packing (torch) and
    through ``oars_deploy.predictors.feature_classes.predictor.feature_input`` (numpy). Returns both graph inputs and
    their max
    abs difference.

    Raises:
        ExportCheckError: the inputs differ by more than 1e-6, or the packed module's scores differ from the
            model's on the preprocessor's (unpadded) batch by more than 1e-5.
    """
    from mmengine.dataset import pseudo_collate

    from oars.inference import build_test_pipeline
    from oars_deploy.predictors.feature_classes.predictor import feature_input

    load = next(s for s in test_pipeline_cfg(cfg) if s.get("type") == "LoadFeatures")
    loaded = list(load.get("modalities", ("rgb", "audio")))
    multi = bool(model.head.multi_label)
    pipeline = build_test_pipeline(cfg)
    with tempfile.TemporaryDirectory(prefix="oars-export-features-") as tmp:
        paths = synthetic_feature_files(tmp, section, loaded, batch, seed)
        items = [pipeline({"filename": p, "label": [0] if multi else 0, "multi_label": multi,
                           "num_classes": int(model.num_classes)}) for p in paths]
        deploy_input = np.stack([feature_input(p, section)[0] for p in paths])
    with torch.no_grad():
        batch_dict = model.data_preprocessor(pseudo_collate(items), training=False)["inputs"]
        torch_input = pack_features(batch_dict, module.modalities, int(section["max_frames"]))
        unpadded = model(batch_dict, None, mode="tensor")
        padded = module(torch_input)
    ref = torch_input.detach().float().cpu().numpy()
    diff = float(np.abs(ref - deploy_input).max())
    tol = PREPROCESS_ATOL * max(1.0, float(np.abs(ref).max()))
    if diff > tol:
        raise ExportCheckError(f"{cfg.filename}: deploy.yaml's feature loading differs from the test pipeline + "
                               f"data preprocessor by {diff:.3g} (max abs), tolerance {tol:.3g}")
    pad_diff = float((padded - unpadded).abs().max())
    if pad_diff > PADDING_ATOL:
        raise ExportCheckError(f"{cfg.filename}: {type(model.head).__name__} gives other scores when the batch is "
                               f"padded to max_frames={section['max_frames']} (max abs diff {pad_diff:.3g}); its "
                               "padded frames must not reach the output")
    return torch_input, deploy_input, diff

