"""OpenVINO IR (``--format openvino``): ``model.xml`` + ``model.bin`` converted from the exported ONNX graph.

- FP32: ``openvino.convert_model(onnx)`` + ``openvino.save_model``; FP16 (``--half``): the same with
  ``compress_to_fp16`` (weights stored in FP16, computed in FP32 on the CPU).
- INT8 (``--int8 --calib-dir``): NNCF's post-training quantisation of the FP32 IR on the calibration batches the
  core already reads (:class:`oars.export.precision.CalibrationReader`: what the deployed predictor feeds the
  graph). Kept in float, as the ONNX INT8 path keeps them: the layers that read the graph input (an image in
  [0, 1] uses half a symmetric int8 range) and everything after the last weighted layer (box decoding, NMS,
  softmax/argmax), so scores and coordinates never share an int8 range. Why found by structure and not by name
  patterns (what ultralytics does with its module names): torch's dynamo exporter names nodes ``node_Conv_238``,
  without the module path, so no name says where a head ends.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os.path as osp
import warnings
from collections.abc import Iterator
from typing import Any

from oars.export.errors import ExportError
from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter, operators_in
from oars.extras import require_extra

WEIGHTED_OPS = ("Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData",
                "MatMul")
PASSIVE_OPS = ("Parameter", "Constant", "Result")


class OpenVINOWriter(FormatWriter):
    """model.xml + model.bin (FP32, FP16 weights, or NNCF INT8), run by ``oars-infer --backend openvino``."""

    name = "openvino"
    backend = "openvino"
    infer_backend = "openvino"
    model_key = "openvino"
    packages = ("openvino",)
    int8_packages = ("nncf",)
    reduces_precision = True

    def write(self, job: FormatJob) -> FormatFiles:
        """model.xml/model.bin of ``job.fp32_onnx_path`` at ``job.precision`` in ``job.out_dir``.

        Raises:
            ExportError: an operator OpenVINO cannot convert (named), or the conversion / quantisation failed.
        """
        ov = require_extra("openvino", f"--format {self.name}")
        model = self._convert(ov, job.fp32_onnx_path)
        if job.precision == "int8":
            model = quantize(model, job)
        xml = osp.join(job.out_dir, "model.xml")
        try:
            with _quiet():
                ov.save_model(model, xml, compress_to_fp16=job.precision == "fp16")
        except Exception as err:  # OpenVINO raises its own pybind classes
            raise ExportError(f"--format openvino: saving {xml} failed: {type(err).__name__}: {err}") from err
        return FormatFiles(main="model.xml", others=["model.bin"])

    def _convert(self, ov: Any, onnx_path: str) -> Any:
        """The OpenVINO model of ``onnx_path``; an operator without a conversion rule is one message naming it."""
        try:
            with _quiet():
                return ov.convert_model(onnx_path)
        except Exception as err:  # OpConversionFailure and friends: pybind classes without a common base
            text = str(err)
            ops = operators_in(text.split("Summary:")[-1], graph_operators(onnx_path))
            if ops:
                raise self.refuse_operators(ops, " (OpenVINO has no conversion rule for it)") from None
            raise ExportError(f"--format openvino: converting {osp.basename(onnx_path)} failed: "
                              f"{type(err).__name__}: {text.strip()[:1000]}") from None


def graph_operators(onnx_path: str) -> list[str]:
    """The operator types of the ONNX graph ``onnx_path`` (``domain:Op`` outside the default domain)."""
    onnx = require_extra("onnx", "tools/export.py --format")
    model = onnx.load(onnx_path, load_external_data=False)
    return sorted({f"{n.domain}:{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
                   for n in model.graph.node})


def float_kept_ops(model: Any) -> list[str]:
    """Friendly names of the ops NNCF must leave in float: the weighted layers that read a graph input, and the
    ops after the last weighted layer (those from which no weighted layer is reachable), except the bias Add /
    activation that directly follows a weighted layer (NNCF fuses it with the layer: ignoring it would keep the
    whole last layer in float)."""
    ops = model.get_ordered_ops()
    reaches: dict[str, bool] = {}
    for op in reversed(ops):  # consumers come after producers in this order
        consumers = [t.get_node() for out in op.outputs() for t in out.get_target_inputs()]
        reaches[op.get_friendly_name()] = op.get_type_name() in WEIGHTED_OPS or any(
            reaches.get(c.get_friendly_name(), False) for c in consumers)
    keep = []
    for op in ops:
        kind = op.get_type_name()
        producers = [v.get_node() for v in op.input_values()]
        if kind in WEIGHTED_OPS and any(p.get_type_name() == "Parameter" for p in producers):
            keep.append(op.get_friendly_name())
        elif (kind not in PASSIVE_OPS and not reaches[op.get_friendly_name()]
              and not any(p.get_type_name() in WEIGHTED_OPS for p in producers)):
            keep.append(op.get_friendly_name())
    return keep


def quantize(model: Any, job: FormatJob) -> Any:
    """NNCF post-training INT8 of ``model`` on ``job.calibration`` (graph input arrays), the ops of
    :func:`float_kept_ops` kept in float.

    Raises:
        ExportError: NNCF is missing (the pip command), there is no calibration data, or quantisation failed.
    """
    nncf = require_extra("nncf", "--format openvino --int8")
    if not len(job.calibration):
        raise ExportError("--format openvino --int8 needs at least one batch of calibration inputs (--calib-dir)")
    dataset = nncf.Dataset(list(range(len(job.calibration))), lambda i: {job.input_name: job.calibration[i]})
    scope = nncf.IgnoredScope(names=float_kept_ops(model), validate=False)
    try:
        with _quiet():
            return nncf.quantize(model, dataset, subset_size=len(job.calibration), ignored_scope=scope)
    except Exception as err:  # NNCF raises many types; name the step and the reason
        raise ExportError(f"--format openvino --int8: NNCF quantisation failed: {type(err).__name__}: "
                          f"{str(err)[:1000]}") from err


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """NNCF and OpenVINO print progress bars and warnings: keep them out of the user's console."""
    loggers = [logging.getLogger(n) for n in ("nncf", "openvino")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


OPENVINO = OpenVINOWriter()
