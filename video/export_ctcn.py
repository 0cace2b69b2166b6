"""Export of a C-TCN (temporal action detection) with the recognizer that extracts its features, into the same
kind of folder as BMN's (:mod:`video.export_localizer`), run by the torch-free ``video_segments`` predictor.

``tools/export.py -c CTCN_CFG -w CTCN_CKPT -o OUT --recognizer-config RCFG --recognizer-weights RCKPT [--snippet N]
[--stride S]`` writes:

- ``model.onnx``: C-TCN's ``mode='tensor'``, input ``features`` float32 [1, C, T] (C = the one stream's width,
  the recognizer's pooled features; T = ``model.temporal_dim``) -> ``offsets`` [1, A, 2] (each anchor's centre and
  width offsets, ``10 * sigmoid - 5``) and ``probs`` [1, A, K + 1] (softmax class scores, background first); no
  decoding nor NMS inside the graph; checked against PyTorch by the core exporter's self-check;
- ``anchors.npy``: float32 [A, 2] (centre, width) in normalised time, the model's anchors (built once by
  ``CTCNAnchorGenerator``: 1785 at full size), in the graph's anchor order;
- ``recognizer.onnx`` and deploy.yaml as for BMN, with ``labels`` = C-TCN's own classes (it names its segments;
  there is no pairing with the recognizer's classes) and in ``segments``: ``localizer: ctcn``, ``anchors`` (the
  file), ``num_anchors``, ``num_classes``, ``decode`` (``variances`` and ``model.test_cfg``'s thresholds and caps,
  :data:`oars_deploy.predictors.video_segments.segments.ctcn_decode.DECODE_KEYS`) and ``max_proposals``.

A C-TCN of several streams (RGB + flow) is refused before anything is built
(:func:`video.export_localizer.refuse_unexportable_localizer`): the predictor extracts RGB features only.
"""

from __future__ import annotations

import inspect
import io

import numpy as np
from mmengine.config import Config
from torch import nn

from oars.export.errors import ExportError
from oars.export.spec import ExportOptions, ExportSpec
from video.export_localizer import REC_FILE, export_with_recognizer, localizer_spec

ANCHORS_FILE = "anchors.npy"
CTCN_OUTPUTS = ("offsets", "probs")


def decode_section(cfg: Config, model: nn.Module) -> dict:
    """deploy.yaml's ``segments.decode``: the offsets' ``variances`` and every threshold and cap of
    :func:`oars_deploy.predictors.video_segments.segments.ctcn_decode.ctcn_detections`, ``model.test_cfg``'s values
    over that function's
    defaults (what ``CTCN.predict`` runs with).

    Raises:
        ExportError: ``model.test_cfg`` has a key the decoding does not take.
    """
    from oars_deploy.predictors.video_segments.segments.ctcn_decode import DECODE_KEYS, ctcn_detections
    from video.models.localizers.ctcn_anchors import VARIANCES

    given = dict(model.test_cfg)
    unknown = sorted(set(given) - set(DECODE_KEYS))
    if unknown:
        raise ExportError(f"{cfg.filename}: model.test_cfg has {unknown}, which C-TCN's decoding does not take "
                          f"(expected some of {list(DECODE_KEYS)})")
    defaults = {k: p.default for k, p in inspect.signature(ctcn_detections).parameters.items() if k in DECODE_KEYS}
    values = {**defaults, **given}
    ints = ("pre_nms_top_k", "max_per_video")
    return {"variances": [float(v) for v in VARIANCES],
            **{k: (int(values[k]) if k in ints else float(values[k])) for k in DECODE_KEYS}}


def anchors_bytes(model: nn.Module) -> bytes:
    """``anchors.npy``'s content: the model's anchors, float32 [A, 2] (centre, width)."""
    buffer = io.BytesIO()
    np.save(buffer, model.anchors.detach().float().cpu().numpy())
    return buffer.getvalue()


def build_ctcn_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of a C-TCN with its recognizer (see the module docstring).

    Raises:
        ExportError: ``--top-k`` given (C-TCN names its segments itself), a ``model.test_cfg`` key the decoding does
            not take, or the recognizer's refusals (:func:`video.export_localizer.load_recognizer`).
    """
    from oars.export.labels import dataset_labels

    if options.extra.get("top_k") is not None:
        raise ExportError(f"{cfg.filename}: --top-k pairs BMN's proposals with the recognizer's top classes; C-TCN "
                          "scores its own classes per segment (leave --top-k out)")
    decode = decode_section(cfg, model)
    labels, _ = dataset_labels(cfg, model)  # C-TCN's classes: before the slow part, a short list fails here
    section, content, _, _ = export_with_recognizer(model, cfg, options)
    a, k = int(model.anchors.shape[0]), int(model.num_classes)
    section.update({"localizer": "ctcn", "anchors": ANCHORS_FILE, "num_anchors": a, "num_classes": k,
                    "decode": decode, "max_proposals": int(model.max_proposals)})
    batch = -1 if options.dynamic else 1
    outputs = [{"name": CTCN_OUTPUTS[0], "shape": [batch, a, 2], "dtype": "float32",
                "meaning": f"per anchor of {ANCHORS_FILE}: (centre, width) offsets in [-5, 5], decoded with "
                           "segments.decode.variances"},
               {"name": CTCN_OUTPUTS[1], "shape": [batch, a, k + 1], "dtype": "float32",
                "meaning": "per anchor: softmax class scores, background first"}]
    postprocess = {"type": "ctcn_segments", "num_classes": k,
                   "inside_graph": "none: anchor decoding, per-class NMS and Soft-NMS run in the predictor"}
    return localizer_spec(model, cfg, options, outputs, postprocess, section, labels,
                          {REC_FILE: content, ANCHORS_FILE: anchors_bytes(model)})
