"""Export of a temporal action localiser (BMN here; C-TCN in :mod:`video.export_ctcn`, which shares this module's
helpers; :mod:`video.export_segments` picks one) together with the recognizer
that extracts its features: one folder that the torch-free ``video_segments`` predictor runs from a video file to
timed action segments.

``tools/export.py -c BMN_CFG -w BMN_CKPT -o OUT --recognizer-config RCFG --recognizer-weights RCKPT [--snippet N]
[--stride S] [--top-k K]`` writes:

- ``model.onnx``: the localiser, input ``features`` float32 [1, C, T] (``T = tscale``; layout ``NCT``) ->
  ``confidence`` [1, 2, D, T], ``start`` [1, T], ``end`` [1, T] (BMN's ``mode='tensor'``), checked against
  PyTorch by the core exporter's self-check;
- ``recognizer.onnx``: the recognizer, input ``clips`` (the clip export's layout, dynamic batch: one row per
  snippet) -> ``features`` [N, C] (the input of ``cls_head.fc_cls`` averaged over the views: what
  ``tools/extract_features.py`` writes) and ``scores`` [N, K] (its class probabilities, the model's
  ``pred_score``), exported and checked against PyTorch here (its pre-processing too, through the clip
  predictor's own code);
- ``deploy.yaml`` with ``predictor: video_segments``, the labels (the recognizer's classes) and the ``segments``
  section: ``localizer: bmn`` (which post-processing the predictor runs), the recognizer's file, input, sampling
  and preprocess steps, the snippet length and stride, ``tscale`` and ``dscale``, the resize rule, the Soft-NMS
  parameters, ``max_proposals`` and ``top_k`` (classes per proposal). ``--snippet`` / ``--stride`` must be those
  the localiser's features were extracted with (default: ``tools/extract_features.py``'s defaults for that
  recognizer).
"""

from __future__ import annotations

import os.path as osp
import tempfile
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from oars.export.errors import ExportCheckError, ExportError
from oars.export.guards import DEFAULT_OPSET
from oars.export.spec import ExportOptions, ExportSpec

INPUT_NAME, LAYOUT = "features", "NCT"
REC_FILE, REC_INPUT, REC_OUTPUTS = "recognizer.onnx", "clips", ("features", "scores")
ACTIVITYNET_TOP_K = 2  # classes paired with each proposal when neither --top-k nor model.classify says (BSN/BMN)
FLAGS = ("recognizer_config", "recognizer_weights", "snippet", "stride", "top_k")
REC_TRACE_BATCH, REC_CHECK_BATCH = 2, 3  # the recognizer graph is traced at 2 snippets and checked at 3


def localizer_kind(cfg: Config) -> str | None:
    """``'bmn'`` or ``'ctcn'`` when ``cfg``'s model is a temporal action localiser (a BMN or a CTCN, or a
    subclass), else None."""
    from video.models.localizers import BMN, CTCN
    from video.registry import MODELS

    model_cls = MODELS.get(str((cfg.get("model") or {}).get("type")))
    if isinstance(model_cls, type) and issubclass(model_cls, BMN):
        return "bmn"
    if isinstance(model_cls, type) and issubclass(model_cls, CTCN):
        return "ctcn"
    return None


def is_localizer_config(cfg: Config) -> bool:
    """Whether ``cfg``'s model is a temporal action localiser (BMN or C-TCN)."""
    return localizer_kind(cfg) is not None


def localizer_input_shape(cfg: Config) -> tuple[int, int]:
    """(C, T) of the localiser's input from the config: BMN's ``feat_dim`` x ``tscale``, C-TCN's streams' widths
    summed x ``temporal_dim`` (defaults: the model classes')."""
    model = cfg.model
    if localizer_kind(cfg) == "ctcn":
        streams = model.get("streams") or {"rgb": 201, "flow": 201}
        return sum(int(w) for w in dict(streams).values()), int(model.get("temporal_dim", 512))
    return int(model.get("feat_dim", 400)), int(model.get("tscale", 100))


def refuse_unexportable_localizer(cfg: Config) -> None:
    """A C-TCN of several feature streams (RGB + flow, PaddleVideo's ActivityNet setting) cannot be exported: the
    predictor makes one stream only, the recognizer's snippet features, since no optical-flow extractor is
    available; the heads' (1, C) kernels span every stream's columns, so the RGB part alone is not that model
    (ExportError pointing at the RGB-only setting)."""
    if localizer_kind(cfg) != "ctcn":
        return
    streams = dict(cfg.model.get("streams") or {"rgb": 201, "flow": 201})
    if len(streams) != 1:
        raise ExportError(f"{cfg.filename}: model.streams={streams}: a C-TCN exports with one feature stream, the "
                          "recognizer's snippet features (the predictor has no optical-flow extractor, and a model "
                          "trained on several streams needs all of them); train and export an RGB-only C-TCN: "
                          "model.streams: {rgb: W} and the same streams in every LoadLocalizationStreams (W = the "
                          "recognizer's feature width), e.g. -o 'model.streams={_delete_: true, rgb: W}'")


def check_localizer_export(cfg: Config, fmt: str, precision: str) -> None:
    """Refuse what the two-graph export cannot make: TensorRT engines and FP16/INT8 graphs (ExportError)."""
    if fmt != "onnx":
        raise ExportError(f"{cfg.filename}: a temporal localiser exports two ONNX graphs (recognizer + localiser) run "
                          f"by ONNX Runtime; --format {fmt} is not supported for it: use --format onnx")
    if precision != "fp32":
        raise ExportError(f"{cfg.filename}: a temporal localiser exports FP32 graphs only (--half / --int8 are for "
                          "single-graph models)")


def localizer_export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """``ExportOptions`` of the localiser: one video's features [1, C, T] (:func:`localizer_input_shape`; the
    predictor runs one video at a time; ``--dynamic`` makes the batch axis dynamic)."""
    shape = (1, *localizer_input_shape(cfg))
    export = dict(cfg.get("export") or {})
    given = export.get("input_shape")
    if given is not None and tuple(int(v) for v in given)[1:] != shape[1:]:
        raise ExportError(f"{cfg.filename}: export.input_shape={list(given)} but the localiser takes "
                          f"{list(shape)} ([B, C, T]); leave export.input_shape out")
    extra = {k: v for k, v in export.items() if k not in ("input_shape", "batch")}
    return ExportOptions(input_shape=shape, dynamic=dynamic, opset=int(opset), extra=extra)


def refuse_localizer_flags(cfg: Config, options: ExportOptions) -> None:
    """A recognizer export given the localiser's flags is an error (they would be silently ignored)."""
    given = [f"--{k.replace('_', '-')}" for k in FLAGS if options.extra.get(k) is not None]
    if given:
        raise ExportError(f"{cfg.filename}: {', '.join(given)} apply to temporal localisers (BMN, C-TCN) only; "
                          f"{cfg.model.get('type')} exports alone")


class LocalizerExport(nn.Module):
    """The localiser graph, the model's ``mode='tensor'``: features [B, C, T] -> BMN's (confidence [B, 2, D, T],
    start [B, T], end [B, T]) or C-TCN's (offsets [B, A, 2], probs [B, A, K + 1])."""

    def __init__(self, localizer: nn.Module) -> None:
        super().__init__()
        self.localizer = localizer

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.localizer(features, None, mode="tensor")


class _FeaturesAndLogits(nn.Module):
    """Stands in for ``cls_head.fc_cls``: returns its input and its logits side by side, [N, C + K], so that the
    head's own pooling and consensus (whatever the head) give the features in the same forward."""

    def __init__(self, fc: nn.Linear) -> None:
        super().__init__()
        self.fc = fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.fc(x)], dim=-1)


class RecognizerFeaturesExport(nn.Module):
    """The recognizer graph: clips -> (pooled features [N, C] averaged over the views, class probabilities [N, K]
    = ``pred_score``). Replaces ``recognizer.cls_head.fc_cls`` by :class:`_FeaturesAndLogits` (the recognizer is
    loaded for this export only).

    Args:
        recognizer: a ``Recognizer2D`` / ``Recognizer3D`` with ``cls_head.fc_cls``.
        add_view_axis: the graph input is [N, 3, T, H, W] (3D, one view).
    """

    def __init__(self, recognizer: nn.Module, add_view_axis: bool) -> None:
        super().__init__()
        head = recognizer.cls_head
        self.feat_dim = int(head.fc_cls.in_features)
        head.fc_cls = _FeaturesAndLogits(head.fc_cls)
        self.recognizer = recognizer
        self.add_view_axis = add_view_axis

    def forward(self, clips: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rec, c = self.recognizer, self.feat_dim
        head = rec.cls_head
        if self.add_view_axis:
            clips = clips.unsqueeze(1)
        x, num_segs, num_views = rec.split_views(clips)
        both = head(rec.backbone_features(x), num_segs)  # [N*V, C + K]
        features = both[:, :c].reshape(-1, num_views, c).mean(dim=1)
        averaged = head.average_views(both[:, c:], num_views)
        if head.average_clips is None:
            averaged = averaged[:, 0]
        scores = averaged if head.average_clips == "prob" else head.activate(averaged)
        return features, scores


def _flag(options: ExportOptions, key: str) -> Any:
    return options.extra.get(key)


def _positive(value: Any, flag: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExportError(f"{where}: {flag} must be a positive int, got {value!r}")
    return int(value)


def load_recognizer(cfg: Config, options: ExportOptions, device: torch.device) -> tuple[Config, nn.Module]:
    """The recognizer of ``--recognizer-config`` / ``--recognizer-weights`` (required), checked to give the
    localiser's ``feat_dim`` features.

    Raises:
        ExportError: a flag missing, a config or checkpoint that cannot be loaded, a model that is not a clip
            recognizer, or a feature width other than the localiser's.
    """
    from oars.config import load_config
    from oars.engine.checkpoint import check_checkpoint_file
    from oars.errors import OarsError
    from oars.pipelines.model import init_model
    from video.features.pooled import check_recognizer

    rcfg_path, weights = _flag(options, "recognizer_config"), _flag(options, "recognizer_weights")
    if not rcfg_path or not weights:
        raise ExportError(f"{cfg.filename}: a temporal localiser is exported with the recognizer that extracts its "
                          "features: add --recognizer-config RECOGNIZER_CFG --recognizer-weights RECOGNIZER_CKPT "
                          "(those tools/extract_features.py used)")
    check_checkpoint_file(weights)
    try:
        rcfg = load_config(str(rcfg_path), [])
        recognizer = init_model(rcfg, str(weights), str(device))
        fc = check_recognizer(recognizer, str(rcfg_path))
    except OarsError as err:
        raise ExportError(f"--recognizer-config {rcfg_path}: {err}") from None
    feat_dim = localizer_input_shape(cfg)[0]
    if fc.in_features != feat_dim:
        key = "model.streams" if localizer_kind(cfg) == "ctcn" else "model.feat_dim"
        raise ExportError(f"{cfg.filename}: {key}={feat_dim} but the recognizer {rcfg_path} gives "
                          f"{fc.in_features}-channel features (cls_head.fc_cls.in_features); export the localiser "
                          "trained on that recognizer's features")
    return rcfg, recognizer.eval()


def export_recognizer(rcfg: Config, recognizer: nn.Module, desc: dict, opset: int, seed: int = 0) -> tuple[bytes,
                                                                                                     dict]:
    """``recognizer.onnx``'s bytes and its self-check: ONNX Runtime on the clip predictor's pre-processing of
    synthetic videos vs the PyTorch module on the test pipeline's, per output.

    Returns:
        (the ONNX file's bytes, ``{'preprocess_max_abs_diff', 'outputs': {name: {max_abs_diff, tolerance}}}``).

    Raises:
        ExportError / ExportCheckError: the exporter failed, or pre-processing or an output differs.
    """
    from oars.export.check import compare_outputs, ort_run, ort_session, torch_outputs
    from oars.export.onnx_export import dynamo_export
    from video.export import input_shape, layout, sample_clip_inputs

    module = RecognizerFeaturesExport(recognizer, add_view_axis=layout(desc) == "NCTHW").eval()
    spec = ExportSpec(module=module, input_name=REC_INPUT, output_names=list(REC_OUTPUTS), outputs=[],
                      postprocess={}, atol=1e-4)
    trace = torch.zeros(input_shape(desc, REC_TRACE_BATCH), dtype=torch.float32,
                        device=next(recognizer.parameters()).device)
    with tempfile.TemporaryDirectory(prefix="oars-export-recognizer-") as tmp:
        path = osp.join(tmp, REC_FILE)
        dynamo_export(module, (trace,), path, [REC_INPUT], list(REC_OUTPUTS), opset,
                      dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4096)},))
        torch_in, deploy_in, pre_diff = sample_clip_inputs(rcfg, recognizer, desc, REC_CHECK_BATCH, seed,
                                                           input_shape(desc, 1)[1:])
        expected = torch_outputs(spec, torch_in)
        actual = ort_run(ort_session(path), {REC_INPUT: deploy_in.astype(np.float32)})
        outputs = compare_outputs(spec, expected, actual, deploy_in, what=f"{REC_FILE}: ")
        with open(path, "rb") as f:
            content = f.read()
    return content, {"preprocess_max_abs_diff": pre_diff, "outputs": outputs}


def sample_feature_inputs(cfg: Config, model: nn.Module, batch: int, seed: int) -> tuple[torch.Tensor, np.ndarray,
                                                                                           float]:
    """Feature sequences of other lengths than ``tscale`` through the training pipeline's ``ResizeTemporal`` +
    ``PackLocalizationInputs`` + data preprocessor (torch) and through the predictor's resize and layout (numpy,
    :func:`oars_deploy.predictors.video_segments.segments.resize_temporal`, transposed to [C, T]); returns both and
    their max abs diff."""
    from oars_deploy.predictors.video_segments.segments import resize_temporal
    from video.transforms import PackLocalizationInputs, ResizeTemporal

    rng = np.random.default_rng(seed)
    c, t = localizer_input_shape(cfg)
    align = _resize_align(cfg)
    items, deploy = [], []
    for i in range(batch):
        feats = rng.normal(0.0, 1.0, (max(1, t // 2 + 7 * i + 3), c)).astype(np.float32)
        items.append(PackLocalizationInputs()(ResizeTemporal(t, align)({"features": feats})))
        deploy.append(resize_temporal(feats, t, align).T)
    with torch.no_grad():
        torch_in = model.data_preprocessor({"inputs": [x["inputs"] for x in items],
                                            "data_samples": [x["data_samples"] for x in items]}, False)["inputs"]
    deploy_in = np.ascontiguousarray(np.stack(deploy), dtype=np.float32)
    diff = float(np.abs(torch_in.float().cpu().numpy() - deploy_in).max())
    if diff > 1e-6:
        raise ExportCheckError(f"{cfg.filename}: the predictor's temporal resize differs from ResizeTemporal by "
                               f"{diff:.3g}")
    return torch_in, deploy_in, diff


def _resize_align(cfg: Config) -> bool:
    """``align_corners`` of the test pipeline's ``ResizeTemporal`` (False when it has none)."""
    from oars.export.deploy_config import test_pipeline_cfg

    try:
        steps = test_pipeline_cfg(cfg)
    except ExportError:
        return False
    return bool(next((s.get("align_corners", False) for s in steps if s.get("type") == "ResizeTemporal"), False))


def recognizer_section(cfg: Config, rcfg: Config, recognizer: nn.Module, desc: dict, options: ExportOptions
                       ) -> dict:
    """The part of deploy.yaml's ``segments`` section every localiser has: the recognizer graph and its clips, the
    snippets, the temporal scale ``tscale`` (the localiser's T) and the resize rule (see
    :mod:`oars_deploy.predictors.video_segments.config`)."""
    from video.export import input_shape, layout
    from video.features.snippets import SnippetPipeline

    where = str(cfg.filename)
    snippet = _positive(_flag(options, "snippet"), "--snippet", where) or SnippetPipeline(rcfg).default_snippet
    stride = _positive(_flag(options, "stride"), "--stride", where) or snippet
    shape = list(input_shape(desc, 1))
    c, t = localizer_input_shape(cfg)
    return {
        "recognizer": {"onnx": REC_FILE, "config": osp.basename(str(rcfg.filename or "")),
                       "input": {"name": REC_INPUT, "shape": [-1] + shape[1:], "layout": layout(desc),
                                 "dtype": "float32", "color": "BGR"},
                       "features": REC_OUTPUTS[0], "scores": REC_OUTPUTS[1],
                       "feat_dim": int(c), "num_classes": int(recognizer.num_classes),
                       "sampling": desc["sampling"], "preprocess": desc["steps"]},
        "snippet": int(snippet), "stride": int(stride), "tscale": int(t), "align_corners": _resize_align(cfg),
    }


def export_with_recognizer(model: nn.Module, cfg: Config, options: ExportOptions) -> tuple[dict, bytes, Config,
                                                                                          nn.Module]:
    """The recognizer side of a localiser export: loaded, checked, exported and self-checked.

    Returns:
        (the ``segments`` section's common part with ``recognizer.check``, ``recognizer.onnx``'s bytes, the
        recognizer's config, the recognizer).
    """
    from video.export import describe_pipeline

    rcfg, recognizer = load_recognizer(cfg, options, next(model.parameters()).device)
    desc = describe_pipeline(rcfg)
    section = recognizer_section(cfg, rcfg, recognizer, desc, options)
    content, rec_check = export_recognizer(rcfg, recognizer, desc, options.opset)
    section["recognizer"]["check"] = rec_check
    return section, content, rcfg, recognizer


def localizer_spec(model: nn.Module, cfg: Config, options: ExportOptions, outputs: list[dict], postprocess: dict,
                   section: dict, labels: list[str], extra_files: dict[str, bytes]) -> ExportSpec:
    """The ``video_segments`` export spec of a localiser graph (``LocalizerExport``) whose outputs are
    ``outputs`` (deploy.yaml entries, in the graph's order), fed the resized snippet features [B, C, T]."""
    c, t = localizer_input_shape(cfg)
    batch = -1 if options.dynamic else 1
    deploy_input = {"name": INPUT_NAME, "shape": [batch, c, t], "dynamic_axes": {0: "batch"} if options.dynamic
                    else {}, "dtype": "float32", "layout": LAYOUT, "color": None,
                    "meaning": f"the recognizer's snippet features resized to {t} steps, channels first"}

    def sample(num: int, seed: int = 0) -> tuple[torch.Tensor, np.ndarray, float]:
        return sample_feature_inputs(cfg, model, num, seed)

    return ExportSpec(module=LocalizerExport(model).eval(), input_name=INPUT_NAME,
                      output_names=[o["name"] for o in outputs], outputs=outputs, postprocess=postprocess, atol=1e-4,
                      sample_inputs=sample, deploy_input=deploy_input, deploy_sections={"segments": section},
                      labels=labels, predictor="video_segments", extra_files=extra_files)


def build_bmn_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of a BMN with its recognizer (see the module docstring; a C-TCN's is
    :func:`video.export_ctcn.build_ctcn_export_spec`, the two chosen by
    :func:`video.export_segments.build_localizer_export_spec`)."""
    from oars.export.labels import dataset_labels

    top_k = _positive(_flag(options, "top_k"), "--top-k", str(cfg.filename)) or model.classify_top_k \
        or ACTIVITYNET_TOP_K
    section, content, rcfg, recognizer = export_with_recognizer(model, cfg, options)
    section.update({"localizer": "bmn", "dscale": int(model.dscale),
                    "soft_nms": {k: (int(v) if k == "top_k" else float(v)) for k, v in model.soft_nms_cfg.items()},
                    "max_proposals": int(model.max_proposals), "top_k": int(top_k)})
    labels, _ = dataset_labels(rcfg, recognizer)
    batch = -1 if options.dynamic else 1
    t, d = int(model.tscale), int(model.dscale)
    outputs = [{"name": "confidence", "shape": [batch, 2, d, t], "dtype": "float32",
                "meaning": "BM map: channel 0 regressed IoU, channel 1 classified IoU of the proposal from s to "
                           "s + d + 1 at cell [d, s]"},
               {"name": "start", "shape": [batch, t], "dtype": "float32", "meaning": "start probability per step"},
               {"name": "end", "shape": [batch, t], "dtype": "float32", "meaning": "end probability per step"}]
    postprocess = {"type": "bmn_segments", "num_classes": int(recognizer.num_classes),
                   "inside_graph": "none: proposals, Soft-NMS and the class pairing run in the predictor"}
    return localizer_spec(model, cfg, options, outputs, postprocess, section, labels, {REC_FILE: content})
