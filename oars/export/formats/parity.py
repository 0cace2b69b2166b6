"""The one parity rule of every export format: its files, run by the runtime backend that deploys them, against
ONNX Runtime on the FP32 ONNX graph, on the export's own check inputs.

What is compared is what the self-check compares (:class:`oars.export.spec.ExportSpec`): the kind's ``compare``
(labels by their logit gap, detections as matched sets) for the max abs difference, and the kind's ``agreement``
(detections: score-weighted recall / precision after IoU matching; otherwise per output, labels: the fraction
equal, dense outputs: 1 - relative RMS error; :func:`oars.export.precision.check_agreement`) for the threshold.

Default thresholds, per precision and kind of output (``--min-agreement`` sets one value for all):

- FP32 (the same graph on another runtime, float noise only): dense outputs 0.999, labels 0.99 (a pixel whose
  two top classes are tied within 1e-6 may flip), the kind's own matched measure (detections) 0.95;
- FP16 and INT8: those of the ONNX reduced-precision graphs (0.99, 0.9: :data:`oars.export.precision.MIN_AGREEMENT`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from oars.export.check import _max_abs_diff, graph_feeds, ort_run, ort_session
from oars.export.errors import ExportCheckError
from oars.export.precision import MIN_AGREEMENT, agreement_threshold, check_agreement
from oars.export.spec import ExportSpec

FP32_MIN_AGREEMENT = {"dense": 0.999, "labels": 0.99, "matched": 0.95}
REFERENCE = "ONNX Runtime"


def default_min_agreement(precision: str, kind: str) -> float:
    """The threshold of an output of ``kind`` (dense, labels, matched) at ``precision`` (see the module doc)."""
    return FP32_MIN_AGREEMENT[kind] if precision == "fp32" else MIN_AGREEMENT[precision]


def check_parity(spec: ExportSpec, fmt: str, precision: str, reference_onnx: str,
                 candidate: Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]], inputs: Sequence[Any],
                 min_agreement: float | None = None) -> dict:
    """Run ``candidate`` (the format's backend: feeds by input name -> outputs by name) and ONNX Runtime on
    ``reference_onnx`` on each of ``inputs`` (deploy inputs: one array, or a dict for a multi-input graph).

    Returns:
        deploy.yaml's ``parity`` section: ``{format, precision, reference, inputs, max_abs_diff (None when the
        kind's comparison finds the outputs not element-wise comparable, with ``note``), agreement {name: value},
        min_agreement {name: threshold}, line}``.

    Raises:
        ExportCheckError: an output is missing or has another shape, or agrees less than its threshold (naming
            the output, the value, the threshold and --min-agreement).
    """
    user = None if min_agreement is None else agreement_threshold("fp32", min_agreement)
    session = ort_session(reference_onnx)
    refs, cands, diffs, note = [], [], [], None
    for x in inputs:
        feeds = graph_feeds(spec, x)
        ref = ort_run(session, feeds)
        cand = {k: np.asarray(v) for k, v in candidate(feeds).items()}
        _check_outputs(spec, fmt, ref, cand)
        refs.append(ref)
        cands.append(cand)
        try:
            per_output = (spec.compare(ref, cand, feeds[spec.input_name]) if spec.compare is not None
                          else {n: _max_abs_diff(ref[n], cand[n]) for n in spec.output_names})
            diffs.append(max(float(v) for v in per_output.values()))
        except ExportCheckError as err:  # the kind's structural check (e.g. more than 1% of labels differ)
            note = str(err)
    reference = {n: np.concatenate([r[n] for r in refs]) for n in spec.output_names}
    result = {n: np.concatenate([c[n] for c in cands]) for n in spec.output_names}
    values = check_agreement(reference, result, precision, spec.agreement, min_agreement=0.0)["agreement"]
    thresholds = {name: user if user is not None else default_min_agreement(precision, _kind(spec, reference, name))
                  for name in values}
    parity: dict[str, Any] = {
        "format": fmt, "precision": precision, "reference": f"{REFERENCE} FP32 (model.onnx)", "inputs": len(inputs),
        "max_abs_diff": None if note or not diffs else max(diffs),
        "agreement": values, "min_agreement": thresholds}
    if note:
        parity["note"] = f"not element-wise comparable: {note}"
    parity["line"] = parity_line(parity)
    for name, value in values.items():
        if value is not None and not value >= thresholds[name]:
            raise ExportCheckError(f"--format {fmt}: the {fmt} {precision.upper()} model agrees with {REFERENCE} "
                                   f"FP32 on {name!r} only {value:.4f} (needed {thresholds[name]:g}; "
                                   "--min-agreement sets the threshold); the export was not written")
    return parity


def parity_line(parity: Mapping[str, Any]) -> str:
    """``openvino FP32 vs ONNX Runtime: max abs diff 3.1e-06 (agreement 1.000)``: the lowest agreement over the
    outputs ("not measured" when the kind measured none, e.g. no detections in either model)."""
    diff = parity.get("max_abs_diff")
    diff_text = "n/a (not element-wise comparable)" if diff is None else f"{diff:.2g}"
    measured = [v for v in parity["agreement"].values() if v is not None]
    agree = f"agreement {min(measured):.3f}" if measured else "agreement not measured"
    return f"{parity['format']} {parity['precision'].upper()} vs {REFERENCE}: max abs diff {diff_text} ({agree})"


def _kind(spec: ExportSpec, reference: Mapping[str, np.ndarray], name: str) -> str:
    """dense, labels or matched: which default threshold an agreement value takes."""
    if spec.agreement is not None or name not in reference:
        return "matched"
    return "dense" if np.issubdtype(reference[name].dtype, np.floating) else "labels"


def _check_outputs(spec: ExportSpec, fmt: str, ref: Mapping[str, np.ndarray], cand: Mapping[str, np.ndarray]) -> None:
    """Every output of the spec present with ONNX Runtime's shape, or one message naming it."""
    for name in spec.output_names:
        if name not in cand:
            raise ExportCheckError(f"--format {fmt}: the {fmt} model has no output {name!r}; it has {sorted(cand)}")
        if cand[name].shape != ref[name].shape:
            raise ExportCheckError(f"--format {fmt}: output {name!r} has shape {list(cand[name].shape)}, "
                                   f"{REFERENCE} gives {list(ref[name].shape)}")
