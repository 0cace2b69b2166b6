"""deploy.yaml from a training config: the preprocessing steps and the file itself.

The schema (keys, step semantics) and its reader/validator live in the torch-free runtime,
``oars_deploy.deploy_config``; this module derives the preprocessing steps from the config's test pipeline and
the model's data preprocessor so that, for the fixed export input (H, W), they give the same float tensor as
``model.data_preprocessor(pipeline(img))``, and writes deploy.yaml after validating it with the same code the
predictors read it with. It imports no torch at import time.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from oars.export.errors import ExportError
from oars_deploy.deploy_writer import write_deploy_yaml  # noqa: F401  (the one writer, the runtime's)

EXPORT_EXAMPLE = "export: {input_shape: [1, 3, 512, 512]}"


# ----------------------------------------------------------------------------- preprocessing from the config
def _is_annotation_or_packing(step_type: str) -> bool:
    """Steps that load/filter labels or pack the sample: nothing to do for the image at deploy time."""
    return "Annotation" in step_type or step_type.startswith("Pack")


def test_pipeline_cfg(cfg: Any) -> list[dict]:
    """The config's test (else val) pipeline as a list of step dicts."""
    loader = cfg.get("test_dataloader") or cfg.get("val_dataloader")
    if not loader:
        raise ExportError(f"{cfg.filename}: no test_dataloader/val_dataloader to take the test pipeline from")
    return [dict(copy.deepcopy(step)) for step in loader["dataset"]["pipeline"]]


def export_input_hw(cfg: Any) -> tuple[int, int]:
    """(H, W) of ``cfg.export.input_shape``; a clear error when the section or key is missing or malformed."""
    export = cfg.get("export")
    if not export or "input_shape" not in export:
        raise ExportError(f"{cfg.filename}: no export.input_shape; add an export section to the config, "
                          f"e.g. `{EXPORT_EXAMPLE}` (B, C, H, W)")
    shape = export["input_shape"]
    if (not isinstance(shape, Sequence) or len(shape) != 4 or not all(isinstance(v, int) and v > 0 for v in shape)
            or shape[1] != 3):
        raise ExportError(f"{cfg.filename}: export.input_shape must be [B, 3, H, W] with positive ints, got {shape!r}")
    return int(shape[2]), int(shape[3])


def _pair(value: Any, where: str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    if isinstance(value, Sequence) and len(value) == 2:
        return int(value[0]), int(value[1])
    raise ExportError(f"{where} must be an int or [W, H], got {value!r}")


def _rescale_size(w: int, h: int, scale: tuple[int, int]) -> tuple[int, int]:
    """oars Resize with keep_ratio: the pipeline's own rule (imported here, so that this module stays light)."""
    from oars.data.transforms.geometric import rescale_size

    return rescale_size(w, h, scale)


def _build_data_preprocessor(cfg: Any) -> Any:
    """The model's data preprocessor, built alone from ``cfg.model.data_preprocessor`` in the config's scope."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.models.data_preprocessor import ImageDataPreprocessor

    dp_cfg = cfg.model.get("data_preprocessor")
    if dp_cfg is None:
        return ImageDataPreprocessor()
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        return MODELS.build(copy.deepcopy(dp_cfg))


def _normalise_value(value: float | Sequence[float], mean: list[float], std: list[float],
                     to_rgb: bool) -> float | list[float]:
    """A uint8-space pad value (BGR order) as the normalised image holds it (float32 arithmetic, like torch)."""
    import numpy as np

    vals = np.broadcast_to(np.asarray(value, dtype=np.float32).reshape(-1), (3,)).copy()
    if to_rgb:
        vals = vals[::-1]
    out = (vals - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    out = [float(str(v)) for v in out.astype(np.float32)]
    return out[0] if len(set(out)) == 1 else out


def preprocess_steps(cfg: Any, data_preprocessor: Any = None) -> list[dict]:
    """Deploy preprocessing for ``cfg`` at the fixed export input (H, W) (see the module docstring).

    ``data_preprocessor``: the model's (an ``ImageDataPreprocessor``); built from the config when None.
    Raises :class:`ExportError` naming the pipeline step when a step cannot be expressed, or when the
    pipeline cannot give an image of the export size (then export.input_shape must change).
    """
    h, w = export_input_hw(cfg)
    where = cfg.filename
    dp = data_preprocessor if data_preprocessor is not None else _build_data_preprocessor(cfg)
    resize: dict | None = None
    pipe_pad: dict | None = None
    pipe_norm: dict | None = None
    for i, step in enumerate(test_pipeline_cfg(cfg)):
        kind = step.get("type", "?")
        name = f"{where}: test pipeline step {i} ({kind})"
        if _is_annotation_or_packing(kind):
            continue
        if kind == "LoadImageFromFile":
            if step.get("color_type", "color") != "color" or step.get("to_float32", False):
                raise ExportError(f"{name}: only color_type=color, to_float32=false can be exported (the predictor "
                                  f"reads 8-bit BGR images), got {step}")
        elif kind == "Resize":
            if resize is not None or pipe_pad is not None or pipe_norm is not None:
                raise ExportError(f"{name}: a Resize after another Resize/Pad/Normalize cannot be expressed in "
                                  "deploy.yaml (one Resize first, then Normalize, then Pad)")
            scale = _pair(step.get("scale"), f"{name}.scale")
            keep = bool(step.get("keep_ratio", True))
            out = _rescale_size(w, h, scale) if keep else scale
            if out != (w, h):
                hint = (f"an image of the export size {w}x{h} (W x H) becomes {out[0]}x{out[1]}" if keep else
                        f"it resizes every image to {scale[0]}x{scale[1]} (W x H)")
                raise ExportError(f"{name}: scale={list(scale)} keep_ratio={keep} cannot give the export input size "
                                  f"(H, W)=({h}, {w}): {hint}. Set export.input_shape to "
                                  f"[B, 3, {out[1]}, {out[0]}] (or change the Resize scale)")
            resize = {"type": "Resize", "size": [w, h], "keep_ratio": keep, "interpolation": "linear"}
        elif kind == "Pad":
            if step.get("size") is not None:
                pw, ph = _pair(step["size"], f"{name}.size")
                if pw > w or ph > h:
                    raise ExportError(f"{name}: pads to {pw}x{ph} (W x H), larger than the export input {w}x{h}; "
                                      f"set export.input_shape to [B, 3, {max(ph, h)}, {max(pw, w)}]")
            else:
                d = int(step.get("size_divisor") or 1)
                if h % d or w % d:
                    raise ExportError(f"{name}: size_divisor={d} but the export input (H, W)=({h}, {w}) is not a "
                                      "multiple of it; set export.input_shape accordingly")
            pipe_pad = {"value": step.get("pad_val", 0), "normalised": pipe_norm is not None}
        elif kind == "Normalize":
            pipe_norm = {"mean": list(step["mean"]), "std": list(step["std"]), "to_rgb": bool(step.get("to_rgb", True))}
        else:
            raise ExportError(f"{name} cannot be expressed in deploy.yaml (supported test-time steps: "
                              "LoadImageFromFile, Resize, Pad, Normalize, annotation loaders and Pack* steps); "
                              "remove it from the test pipeline before exporting")

    if resize is None:
        raise ExportError(f"{where}: the test pipeline has no Resize step, so images reach the model at their own "
                          f"size; an exported model takes a fixed (H, W)=({h}, {w}): add "
                          f"{{type: Resize, scale: [{w}, {h}], keep_ratio: true}} to the test pipeline")
    dp_norm = _dp_normalisation(dp)
    if pipe_norm is not None and (dp_norm["to_rgb"] or getattr(dp, "mean", None) is not None):
        raise ExportError(f"{where}: the test pipeline has Normalize and the model's data_preprocessor normalises "
                          "(or swaps channels) too; deploy.yaml holds one Normalize — keep one of them")
    norm = pipe_norm or dp_norm
    # The data preprocessor pads to at least `size`, rounded up to `size_divisor`: it must leave (H, W) alone.
    dp_h, dp_w = dp.target_shape([(h, w)]) if hasattr(dp, "target_shape") else (h, w)
    divisor = int(getattr(dp, "size_divisor", None) or 1)
    if (dp_h, dp_w) != (h, w):
        raise ExportError(f"{where}: the model's data_preprocessor pads a {h}x{w} (H x W) image to {dp_h}x{dp_w} "
                          f"(size_divisor={divisor}, size={getattr(dp, 'size', None)}); set export.input_shape to "
                          f"[B, 3, {dp_h}, {dp_w}]")
    if pipe_pad is not None:
        value = pipe_pad["value"]
        if not pipe_pad["normalised"]:
            value = _normalise_value(value, norm["mean"], norm["std"], norm["to_rgb"])
        elif isinstance(value, Sequence):
            value = [float(v) for v in value]
        else:
            value = float(value)
    else:
        value = float(getattr(dp, "pad_val", 0))
    steps = [resize, {"type": "Normalize", **norm}]
    pad = {"type": "Pad", "size": [w, h], "value": value}
    if divisor > 1:
        pad["size_divisor"] = divisor
    steps += [pad, {"type": "Permute"}]
    return steps


def _dp_normalisation(dp: Any) -> dict:
    mean, std = getattr(dp, "mean", None), getattr(dp, "std", None)
    if mean is None:
        mean_l, std_l = [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]
    else:
        mean_l, std_l = _short_floats(mean), _short_floats(std)
        if len(mean_l) == 1:
            mean_l *= 3
        if len(std_l) == 1:
            std_l *= 3
    return {"mean": mean_l, "std": std_l, "to_rgb": bool(getattr(dp, "bgr_to_rgb", False))}


def _short_floats(values: Any) -> list[float]:
    """float32 tensor values as the shortest decimals that give the same float32 (123.675, not 123.67500305...)."""
    import numpy as np

    return [float(str(np.float32(v))) for v in values.reshape(-1).tolist()]
