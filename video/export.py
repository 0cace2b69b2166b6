"""Video export hook: preprocessed clips -> class probabilities [N, C] (views averaged), with deploy.yaml's
``sampling`` section and video preprocess steps.

The graph is the recognizer in tensor mode on the data preprocessor's output, followed by what ``predict`` does to
it, so the exported ``scores`` are the PyTorch model's ``pred_score``:

- 2D recognizers (TSN, TSM, C2D non-local): input ``clips`` float32 [N, V*T, 3, H, W] (layout ``NTCHW``: V views
  of T frames, views-major; T = the configured segments, ``SampleFrames.num_clips * clip_len``);
- 3D recognizers (R(2+1)D, I3D): [N, 3, T, H, W] (``NCTHW``) for one view, [N, V, 3, T, H, W] (``NVCTHW``) for
  several (multi-clip or ThreeCrop test);
- output ``scores`` float32 [N, C]: ``average_clips: prob`` -> mean of the views' softmax (sigmoid for
  multi-label); ``score`` -> softmax of the mean logits; None (one view only) -> softmax of the logits.

N is dynamic with ``--dynamic``; everything else is fixed by the test pipeline, which must be
VideoInit (pyav) -> SampleFrames (test_mode) -> VideoDecode -> Resize -> CenterCrop | ThreeCrop -> FormatShape ->
PackActionInputs. The input size comes from that pipeline; ``export.input_shape``, when written, must equal it.
The self-check decodes synthetic videos through the test pipeline + data preprocessor and through the deployed
predictor's own code (``oars_deploy.predictors.clip_classes.predictor.video_input``) and requires the same tensor.

Frame-feature models (FeatureRecognizer: AttentionLSTM / AttentionCluster / NeXtVLAD) export through
:mod:`video.export_features` (one packed ``features`` input [N, T, sum D + 1], deploy.yaml ``features`` section).
"""

from __future__ import annotations

import copy
import os.path as osp
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from oars.export.deploy_config import _build_data_preprocessor, _dp_normalisation, test_pipeline_cfg
from oars.export.errors import ExportCheckError, ExportError
from oars.export.guards import DEFAULT_OPSET
from oars.export.spec import ExportOptions, ExportSpec
from oars_deploy.clips.sampling import MIN_VIDEO_FRAMES
from video.export_features import build_feature_export_spec, feature_export_options, is_feature_config

PREPROCESS_ATOL = 1e-6
SKIPPED = ("VideoDecode", "PackActionInputs")
INPUT_NAME, OUTPUT_NAME = "clips", "scores"


# ----------------------------------------------------------------------------- the test pipeline as deploy data
def describe_pipeline(cfg: Config) -> dict:
    """The test pipeline of a clip classifier as deploy data.

    Returns:
        ``{'sampling': deploy.yaml sampling section, 'steps': video preprocess steps (Normalize and FormatShape
        included), 'format': 'NCHW'|'NCTHW', 'views': V, 'clip_len': T, 'size': (H, W)}``.

    Raises:
        ExportError: naming the config and the step that cannot be expressed.
    """
    where = cfg.filename
    sampling: dict | None = None
    spatial: list[dict] = []
    fmt: str | None = None
    crops, size = 1, None
    backend = None
    for i, step in enumerate(test_pipeline_cfg(cfg)):
        kind = step.get("type", "?")
        name = f"{where}: test pipeline step {i} ({kind})"
        if kind in SKIPPED:
            continue
        if kind == "VideoInit":
            backend = step.get("backend", "pyav")
            if backend != "pyav":
                raise ExportError(f"{name}: backend {backend!r}; the deployed predictors number frames as the pyav "
                                  "decoder does: export with backend: pyav")
        elif kind == "SampleFrames":
            if not step.get("test_mode", False):
                raise ExportError(f"{name}: test_mode must be true in the test pipeline (random sampling cannot be "
                                  "deployed)")
            sampling = {"clip_len": int(step["clip_len"]), "frame_interval": int(step.get("frame_interval", 1)),
                        "num_clips": int(step.get("num_clips", 1)),
                        "out_of_bound_opt": str(step.get("out_of_bound_opt", "loop")),
                        "twice_sample": bool(step.get("twice_sample", False)),
                        "min_frames": int(step.get("min_frames", MIN_VIDEO_FRAMES))}
        elif kind == "Resize":
            spatial.append(_resize_step(step, name))
            size = None
        elif kind in ("CenterCrop", "ThreeCrop"):
            cw, ch = _pair(step.get("crop_size"), f"{name}.crop_size")
            spatial.append({"type": kind, "size": [cw, ch]})
            crops *= 3 if kind == "ThreeCrop" else 1
            size = (ch, cw)
        elif kind == "FormatShape":
            fmt = step.get("input_format", "NCHW")
        else:
            raise ExportError(f"{name} cannot be expressed in deploy.yaml (supported test-time steps: VideoInit, "
                              "SampleFrames, VideoDecode, Resize, CenterCrop, ThreeCrop, FormatShape, "
                              "PackActionInputs); remove it from the test pipeline before exporting")
    if backend is None or sampling is None:
        raise ExportError(f"{where}: the test pipeline needs VideoInit and SampleFrames (video files; frame folders "
                          "and feature files are not deployable as clips)")
    if fmt is None:
        raise ExportError(f"{where}: the test pipeline has no FormatShape step")
    if size is None:
        if spatial and spatial[-1].get("keep_ratio") is False and "scale" in spatial[-1]:
            size = (int(spatial[-1]["scale"][1]), int(spatial[-1]["scale"][0]))
        else:
            raise ExportError(f"{where}: the test pipeline gives clips of each video's own aspect ratio; an exported "
                              "model takes a fixed (H, W): end the spatial steps with CenterCrop or ThreeCrop "
                              "(or a Resize with keep_ratio: false)")
    sampling["decoder"] = "pyav"
    views = crops * sampling["num_clips"] * (2 if sampling["twice_sample"] else 1)
    norm = _dp_normalisation(_build_data_preprocessor(cfg))
    steps = spatial + [{"type": "Normalize", **norm}, {"type": "FormatShape", "input_format": fmt}]
    return {"sampling": sampling, "steps": steps, "format": fmt, "views": views,
            "clip_len": sampling["clip_len"], "size": size}


def _pair(value: Any, where: str) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, Sequence) and len(value) == 2:
        return int(value[0]), int(value[1])
    raise ExportError(f"{where} must be an int or [w, h], got {value!r}")


def _resize_step(step: dict, where: str) -> dict:
    out: dict[str, Any] = {"type": "Resize", "interpolation": step.get("interpolation", "bilinear")}
    if step.get("short_side") is not None:
        out["short_side"] = int(step["short_side"])
    elif step.get("scale") is not None:
        scale = step["scale"]
        out["scale"] = float(scale) if isinstance(scale, float) else [int(v) for v in scale]
        out["keep_ratio"] = bool(step.get("keep_ratio", True))
    else:
        raise ExportError(f"{where}: needs scale or short_side")
    return out


def input_shape(desc: dict, batch: int) -> tuple[int, ...]:
    """The graph input shape for a batch: [B, V*T, 3, H, W] (2D), [B, 3, T, H, W] (3D, V = 1) or
    [B, V, 3, T, H, W] (3D)."""
    h, w = desc["size"]
    v, t = desc["views"], desc["clip_len"]
    if desc["format"] == "NCHW":
        return batch, v * t, 3, h, w
    return (batch, 3, t, h, w) if v == 1 else (batch, v, 3, t, h, w)


def layout(desc: dict) -> str:
    return "NTCHW" if desc["format"] == "NCHW" else ("NCTHW" if desc["views"] == 1 else "NVCTHW")


# ----------------------------------------------------------------------------- hooks the export core calls
def export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """``ExportOptions`` with the clip shape of the test pipeline (batch: ``export.input_shape[0]`` or
    ``export.batch``, default 1); a written ``export.input_shape`` must be that shape. Feature models: see
    :mod:`video.export_features`."""
    if is_feature_config(cfg):
        return feature_export_options(cfg, dynamic, opset)
    export = dict(cfg.get("export") or {})
    desc = describe_pipeline(cfg)
    given = export.get("input_shape")
    batch = int(given[0]) if given else int(export.get("batch", 1))
    if batch < 1:
        raise ExportError(f"{cfg.filename}: the export batch must be >= 1, got {batch}")
    shape = input_shape(desc, batch)
    if given is not None and tuple(int(v) for v in given) != shape:
        raise ExportError(f"{cfg.filename}: export.input_shape={list(given)} but the test pipeline gives clips of "
                          f"{list(shape)} ({layout(desc)}: views x frames from SampleFrames and the crops, (H, W) "
                          f"from the crop); set export.input_shape to {list(shape)} or leave it out")
    extra = {k: v for k, v in export.items() if k not in ("input_shape", "batch")}
    return ExportOptions(input_shape=shape, dynamic=dynamic, opset=int(opset), extra=extra)


def preprocess_steps(cfg: Config) -> list[dict]:
    """deploy.yaml's video preprocess steps (see :mod:`oars_deploy.clips.preprocess`); none for a feature model
    (its deploy.yaml ``features`` section says how files are read)."""
    if is_feature_config(cfg):
        return []
    return describe_pipeline(cfg)["steps"]


class RecognizerExport(nn.Module):
    """The traced graph: clips -> backbone -> head -> views averaged -> probabilities (= ``pred_score``).

    Args:
        recognizer: a ``Recognizer2D`` / ``Recognizer3D``.
        add_view_axis: the graph input is [N, 3, T, H, W] (3D, one view): the view axis is added inside.
    """

    def __init__(self, recognizer: nn.Module, add_view_axis: bool) -> None:
        super().__init__()
        self.recognizer = recognizer
        self.add_view_axis = add_view_axis

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        rec = self.recognizer
        head = rec.cls_head
        if self.add_view_axis:
            clips = clips.unsqueeze(1)
        x, num_segs, num_views = rec.split_views(clips)
        # the whole batch at once: test_cfg.max_testing_views only bounds memory, the numbers are the same
        averaged = head.average_views(head(rec.backbone_features(x), num_segs), num_views)
        if head.average_clips == "prob":
            return averaged
        if head.average_clips is None:
            averaged = averaged[:, 0]
        return head.activate(averaged)


def build_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of a video recognizer (see the module docstring; feature models:
    :mod:`video.export_features`)."""
    if is_feature_config(cfg):
        return build_feature_export_spec(model, cfg, options)
    head = getattr(model, "cls_head", None)
    if head is None or not hasattr(model, "split_views"):
        raise ExportError(f"{cfg.filename}: {type(model).__name__} is not a clip recognizer (Recognizer2D / "
                          "Recognizer3D) nor a FeatureRecognizer with a LoadFeatures test pipeline")
    desc = describe_pipeline(cfg)
    if head.average_clips is None and desc["views"] > 1:
        raise ExportError(f"{cfg.filename}: cls_head.average_clips is null but the test pipeline makes "
                          f"{desc['views']} views; set average_clips to prob or score")
    fmt = model.data_preprocessor.format_shape
    if fmt != desc["format"]:
        raise ExportError(f"{cfg.filename}: FormatShape.input_format={desc['format']} but the data preprocessor's "
                          f"format_shape={fmt}")
    module = RecognizerExport(model, add_view_axis=layout(desc) == "NCTHW").eval()
    shape = list(options.input_shape)
    batch = -1 if options.dynamic else shape[0]
    num_classes = int(model.num_classes)
    multi = bool(head.multi_label)
    activation = "sigmoid" if multi else "softmax"
    meaning = {"prob": f"mean over the test views of the per-view {activation}",
               "score": f"{activation} of the mean over the views of the logits",
               None: f"{activation} of the logits"}[head.average_clips]
    outputs = [{"name": OUTPUT_NAME, "shape": [batch, num_classes], "dtype": "float32",
                "meaning": f"class probabilities: {meaning} (the model's pred_score)"}]
    postprocess = {"type": "classification", "num_classes": num_classes, "multi_label": multi,
                   "average_clips": head.average_clips, "output": OUTPUT_NAME, "topk": 5}
    deploy_input = {"name": INPUT_NAME, "shape": [batch] + shape[1:],
                    "dynamic_axes": {0: "batch"} if options.dynamic else {}, "dtype": "float32",
                    "layout": layout(desc), "color": "BGR"}

    def sample(num: int, seed: int = 0) -> tuple[torch.Tensor, np.ndarray, float]:
        return sample_clip_inputs(cfg, model, desc, num, seed, shape[1:])

    return ExportSpec(module=module, input_name=INPUT_NAME, output_names=[OUTPUT_NAME], outputs=outputs,
                      postprocess=postprocess, atol=1e-4, sample_inputs=sample, deploy_input=deploy_input,
                      deploy_sections={"sampling": desc["sampling"]}, predictor="clip_classes")


# ----------------------------------------------------------------------------- the self-check's input
def synthetic_video(path: str, h: int, w: int, num_frames: int, seed: int = 0) -> str:
    """Write a BGR video of ``num_frames`` frames h x w (even) with a moving, noisy pattern; returns ``path``."""
    from oars.export.check import synthetic_image
    from video.demo_data import write_video

    base = synthetic_image(h, w, seed)
    frames = [np.roll(base, shift=(2 * t, 3 * t), axis=(0, 1)) for t in range(num_frames)]
    write_video(path, frames)
    return path


def sample_clip_inputs(cfg: Config, model: nn.Module, desc: dict, batch: int, seed: int,
                       per_video: Sequence[int]) -> tuple[torch.Tensor, np.ndarray, float]:
    """``batch`` synthetic videos (another aspect ratio than the crop, more frames than one sampling needs)
    through the test pipeline + data preprocessor (torch) and through
    ``oars_deploy.predictors.clip_classes.predictor.video_input``
    (numpy). Returns both graph inputs and their max abs difference; :class:`ExportCheckError` beyond 1e-6."""
    from mmengine.dataset import pseudo_collate

    from oars.inference import build_test_pipeline
    from oars_deploy.predictors.clip_classes.predictor import video_input

    h, w = desc["size"]
    s = desc["sampling"]
    span = max(s["clip_len"] * s["frame_interval"] * s["num_clips"], s.get("min_frames", MIN_VIDEO_FRAMES))
    vh, vw = 2 * ((5 * h // 4 + 1) // 2), 2 * ((7 * w // 4 + 1) // 2)  # even, not the crop's aspect ratio
    pipeline = build_test_pipeline(cfg)
    torch_items, deploy_items = [], []
    with tempfile.TemporaryDirectory(prefix="oars-export-video-") as tmp:
        for i in range(batch):
            path = synthetic_video(osp.join(tmp, f"sample_{i}.mp4"), vh, vw, span + 5 + i, seed + i)
            torch_items.append(pipeline({"filename": path, "start_index": 0, "modality": "RGB",
                                         "multi_label": False, "num_classes": int(model.num_classes)}))
            deploy_items.append(video_input(path, s, copy.deepcopy(desc["steps"]))[0].reshape(tuple(per_video)))
    with torch.no_grad():
        torch_input = model.data_preprocessor(pseudo_collate(torch_items), training=False)["inputs"]
    torch_input = torch_input.reshape(batch, *per_video)
    deploy_input = np.stack(deploy_items)
    ref = torch_input.detach().float().cpu().numpy()
    diff = float(np.abs(ref - deploy_input).max())
    tol = PREPROCESS_ATOL * max(1.0, float(np.abs(ref).max()))
    if diff > tol:
        raise ExportCheckError(f"{cfg.filename}: deploy.yaml's video preprocessing differs from the test pipeline + "
                               f"data preprocessor by {diff:.3g} (max abs), tolerance {tol:.3g}")
    return torch_input, deploy_input, diff


# ----------------------------------------------------------------------------- tools/eval.py --model-dir
def export_predictor(model_dir: str, device: str = "cpu", backend: str = "onnxruntime") -> Any:
    """The runtime predictor ``oars-infer`` runs a video export with: ``VideoPredictor`` (``clip_classes``,
    video files in) or ``FeaturePredictor`` (``feature_classes``, feature files in); both take a list of paths.

    Raises:
        oars_deploy.errors.DeployError: not an export folder (the runtime's message).
        ExportError: an export of another kind (a temporal localiser's segments), naming it.
    """
    from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
    from oars_deploy.plugins import predictor_for

    path = osp.join(model_dir, DEPLOY_FILE)
    plugin = predictor_for(read_deploy_yaml(path), path)
    if plugin.name == "clip_classes":
        from oars_deploy.predictors.clip_classes.predictor import VideoPredictor

        return VideoPredictor(model_dir, device=device, backend=backend)
    if plugin.name == "feature_classes":
        from oars_deploy.predictors.feature_classes.predictor import FeaturePredictor

        return FeaturePredictor(model_dir, device=device, backend=backend)
    raise ExportError(f"--model-dir {model_dir}: a {plugin.name} export ({plugin.describes}); tools/eval.py "
                      "--model-dir evaluates the video task's clip and feature classifiers (clip_classes, "
                      "feature_classes)")
