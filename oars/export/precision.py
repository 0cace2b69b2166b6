"""Reduced precision inside the ONNX graph: FP16 tensors, or INT8 with Q/DQ nodes (explicit quantization).

Why in the graph and not as TensorRT builder flags: TensorRT 11 removed the weak-typing flags (``BuilderFlag.FP16``,
``BuilderFlag.INT8``) and the INT8 calibrators; an engine's precision now comes from the types and Q/DQ nodes of
the network it parses (strong typing). Doing the conversion on the ONNX file also means one reduced-precision
model for every runtime (ONNX Runtime on the CPU or GPU, TensorRT 10 and 11), and that it is checked here, on
the CPU, against the FP32 graph before anything is deployed.

- FP16: ONNX Runtime's float16 converter (shipped in the onnxruntime wheel); inputs and outputs stay float32, and
  the ops whose results are indices or need the float32 range (NMS, TopK, Range, ...) keep float32.
- INT8: ONNX Runtime's static quantizer in QDQ format, symmetric int8 activations and per-channel symmetric int8
  weights in [-127, 127], biases left in float (zero points 0: what TensorRT's explicit quantization takes), on
  Conv/ConvTranspose/MatMul/Gemm, with ranges calibrated (entropy by default) on what the deployed predictor feeds
  the graph: images run through deploy.yaml's pre-processing, or the task's own files (:class:`CalibrationReader`:
  a clip classifier's videos decoded, sampled and pre-processed by its runtime predictor's code). The layers that
  read the image itself stay in float: an image scaled to [0, 1] uses only half of a symmetric int8 range, and on
  the `make demo` YOLOv3 that one layer cost a third of the detections (score-weighted recall 0.67 with it
  quantized, 0.99 without).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import os.path as osp
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from oars.export.errors import ExportCheckError, ExportError
from oars.extras import require_extra
from oars_deploy.atomic import temp_path

PRECISIONS = ("fp32", "fp16", "int8")
CALIB_METHODS = ("entropy", "minmax", "percentile")
# what a missing package of the deploy extra is told to be needed by (oars.extras.require_extra)
HALF_FEATURE, INT8_FEATURE = "tools/export.py --half", "tools/export.py --int8"
# agreement with the FP32 graph below which a reduced-precision export fails (see `check_agreement`)
MIN_AGREEMENT = {"fp16": 0.99, "int8": 0.9}
CALIB_GROUP = 8  # calibration batches whose activations are held at once
FP32_OPS = ("ArgMax", "ArgMin")  # index results: a tie broken differently in FP16 changes a label for nothing
QUANTIZED_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def precision_of(half: bool, int8: bool) -> str:
    """'fp32', 'fp16' or 'int8' from the CLI flags (INT8 wins: layers without Q/DQ stay in FP32)."""
    return "int8" if int8 else "fp16" if half else "fp32"


def precision_file(precision: str) -> str:
    """The ONNX file name of a precision: model.onnx (fp32), model_fp16.onnx, model_int8.onnx."""
    if precision not in PRECISIONS:
        raise ExportError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    return "model.onnx" if precision == "fp32" else f"model_{precision}.onnx"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ONNX Runtime's converters print progress and root-logger warnings: keep them out of the user's console."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


# ----------------------------------------------------------------------------- FP16
def convert_fp16(src: str, dst: str) -> str:
    """Write an FP16 copy of the ONNX model ``src`` to ``dst`` (float32 inputs/outputs kept); returns ``dst``."""
    onnx = require_extra("onnx", HALF_FEATURE)
    float16 = require_extra("onnxruntime.transformers.float16", HALF_FEATURE)
    try:
        with _quiet():
            model = float16.convert_float_to_float16(
                onnx.load(src), keep_io_types=True,
                op_block_list=sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(FP32_OPS)))
    except Exception as err:  # the converter raises many types; name the file and the reason
        raise ExportError(f"FP16 conversion of {src} failed: {type(err).__name__}: {err}") from err
    _save_atomically(model, dst)
    return dst


# ----------------------------------------------------------------------------- INT8
class CalibrationReader:
    """How a folder of calibration files becomes model inputs, with the runtime's own reading and pre-processing.

    Why a class the task can replace: the calibration data must be what the deployed predictor feeds the graph
    (image models: images through deploy.yaml's ``preprocess``; a clip classifier: videos decoded, sampled and
    pre-processed as its predictor does), and only the task knows which. This default reads images; a task gives
    its own through :meth:`oars.task_roles.Exporter.calibration_reader`.

    ``what`` names the files in messages (plural). ``list_files`` lists the folder, ``items`` turns files into
    calibration units (default: one per file; a video may give several clips), ``load`` reads units into one batch.
    """

    what = "images"

    def list_files(self, folder: str) -> list[str]:
        """Sorted calibration files of ``folder``.

        Raises:
            oars_deploy.errors.UserError: the folder holds none (the message says what it holds).
        """
        from oars_deploy.image_files import list_images

        return list_images(folder)

    def items(self, files: Sequence[str]) -> list[Any]:
        """The calibration units of ``files``, in order (here the files themselves)."""
        return list(files)

    def load(self, items: Sequence[Any], deploy_cfg: dict) -> np.ndarray:
        """float32 [len(items), 3, H, W]: the images through deploy.yaml's ``preprocess``.

        Raises:
            ExportError: an image cannot be read (naming it).
        """
        import cv2

        from oars_deploy.preprocess import preprocess

        images = []
        for f in items:
            img = cv2.imread(f, cv2.IMREAD_COLOR)
            if img is None:
                raise ExportError(f"--calib-dir: cannot read image {f}")
            images.append(img)
        x, _ = preprocess(images, deploy_cfg["preprocess"], np, "float32")
        return x


IMAGE_READER = CalibrationReader()


def calibration_files(calib_dir: str, reader: CalibrationReader | None = None) -> list[str]:
    """Sorted calibration files of ``calib_dir`` (``reader``'s kind: images by default); an :class:`ExportError`
    naming the folder when it is not one or holds none (the message says what it holds instead)."""
    from oars_deploy.errors import UserError

    reader = reader or IMAGE_READER
    if not calib_dir or not osp.isdir(calib_dir):
        raise ExportError(f"--calib-dir {calib_dir}: not a folder (INT8 needs a folder of calibration {reader.what})")
    try:
        return reader.list_files(calib_dir)
    except UserError as err:
        raise ExportError(f"--calib-dir: {err}") from None


def calibration_images(calib_dir: str) -> list[str]:
    """Sorted image files in ``calib_dir`` (:func:`calibration_files` with the image reader)."""
    return calibration_files(calib_dir, IMAGE_READER)


class CalibrationBatches(Sequence):
    """float32 [batch, ...] model inputs made from calibration files by a :class:`CalibrationReader`, read when
    indexed (so calibration holds a few batches in memory, not the whole set); the last batch is filled up by
    repeating its last unit (a model exported with a static batch takes only full batches)."""

    def __init__(self, files: Sequence[str], deploy_cfg: dict, batch: int,
                 reader: CalibrationReader | None = None) -> None:
        self.reader = reader or IMAGE_READER
        self.items, self.deploy, self.batch = self.reader.items(files), deploy_cfg, int(batch)

    def __len__(self) -> int:
        return -(-len(self.items) // self.batch)

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        start = (index % len(self)) * self.batch
        chunk = self.items[start:start + self.batch]
        chunk += [chunk[-1]] * (self.batch - len(chunk))
        return np.ascontiguousarray(self.reader.load(chunk, self.deploy), dtype=np.float32)


def calibration_batches(files: Sequence[str], deploy_cfg: dict, batch: int,
                        reader: CalibrationReader | None = None) -> CalibrationBatches:
    """The calibration inputs of ``files`` in batches of ``batch`` (see :class:`CalibrationBatches`)."""
    return CalibrationBatches(files, deploy_cfg, batch, reader)


def quantize_int8(src: str, dst: str, batches: Sequence[np.ndarray], input_name: str,
                  method: str = "entropy") -> str:
    """Write a Q/DQ INT8 copy of ``src`` to ``dst``, its activation ranges calibrated on ``batches``.

    The calibrator sees the batches in groups of at most ``CALIB_GROUP`` (its histograms are merged group by group),
    so memory does not grow with the number of calibration inputs.
    """
    from mmengine.utils import ProgressBar

    q = require_extra("onnxruntime.quantization", INT8_FEATURE)

    if method not in CALIB_METHODS:
        raise ExportError(f"calibration method must be one of {list(CALIB_METHODS)}, got {method!r}")
    calibrate = {"entropy": q.CalibrationMethod.Entropy, "minmax": q.CalibrationMethod.MinMax,
                 "percentile": q.CalibrationMethod.Percentile}[method]
    if not len(batches):
        raise ExportError("INT8 calibration needs at least one batch of calibration inputs")
    bar = ProgressBar(len(batches), file=sys.stderr)
    group = max(d for d in range(1, CALIB_GROUP + 1) if len(batches) % d == 0)  # ORT wants equal groups

    class Reader(q.CalibrationDataReader):
        """ONNX Runtime's strided reader protocol: ``set_range`` picks a group, ``get_next`` walks it."""

        def __init__(self) -> None:
            self.indices = iter(range(len(batches)))

        def __len__(self) -> int:
            return len(batches)

        def set_range(self, start_index: int, end_index: int) -> None:
            self.indices = iter(range(start_index, min(end_index, len(batches))))

        def get_next(self) -> dict[str, np.ndarray] | None:
            i = next(self.indices, None)
            if i is None:
                return None
            bar.update()
            return {input_name: batches[i]}

    tmp = temp_path(dst)
    try:
        keep_float = layers_reading_inputs(src)
        with _quiet():
            q.quantize_static(src, tmp, Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                              nodes_to_exclude=keep_float,
                              activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8,
                              op_types_to_quantize=list(QUANTIZED_OPS), calibrate_method=calibrate,
                              extra_options={"ActivationSymmetric": True, "WeightSymmetric": True,
                                             "QuantizeBias": False, "CalibStridedMinMax": group})
        os.replace(tmp, dst)
    except ExportError:
        raise
    except Exception as err:
        raise ExportError(f"INT8 quantization of {src} failed: {type(err).__name__}: {err}") from err
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
        sys.stderr.write("\n")
    return dst


def layers_reading_inputs(path: str) -> list[str]:
    """Names of the quantizable nodes that read a graph input directly (the first conv of an image model)."""
    onnx = require_extra("onnx", INT8_FEATURE)
    model = onnx.load(path, load_external_data=False)
    inputs = {i.name for i in model.graph.input}
    unnamed = [n for n in model.graph.node if n.op_type in QUANTIZED_OPS and not n.name and inputs & set(n.input)]
    if unnamed:
        raise ExportError(f"{path}: a {unnamed[0].op_type} node reading the model input has no name, so it cannot be "
                          "kept out of INT8 quantization")
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OPS and inputs & set(n.input)]


def _save_atomically(model: Any, dst: str) -> None:
    onnx = require_extra("onnx", HALF_FEATURE)
    tmp = temp_path(dst)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, dst)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)


# ----------------------------------------------------------------------------- agreement with FP32
def output_agreement(reference: np.ndarray, candidate: np.ndarray) -> float | None:
    """How far a reduced-precision output agrees with the FP32 one, in [0, 1].

    Integer outputs (labels, counts): the fraction of equal elements. Float outputs: 1 - the relative RMS error
    ``||c - r|| / ||r||`` (clipped at 0), which, unlike a cosine, also catches a wrong scale. NaN gives 0.
    An empty output gives ``None``: nothing was measured.
    """
    if reference.shape != candidate.shape:
        return 0.0
    if reference.size == 0:
        return None
    if not np.issubdtype(reference.dtype, np.floating):
        return float((reference == candidate).mean())
    r, c = reference.astype(np.float64), candidate.astype(np.float64)
    norm = float(np.linalg.norm(r))
    err = float(np.linalg.norm(c - r))
    if not np.isfinite(err):
        return 0.0
    if norm == 0.0:
        return 1.0 if err == 0.0 else 0.0
    return max(0.0, 1.0 - err / norm)


def agreement_threshold(precision: str, min_agreement: Any = None) -> float:
    """``export.min_agreement`` when set (a number in [0, 1], else an error naming the key), else the default of
    ``precision``."""
    if min_agreement is None:
        return MIN_AGREEMENT[precision]
    if isinstance(min_agreement, bool) or not isinstance(min_agreement, (int, float)) or not 0 <= min_agreement <= 1:
        raise ExportError(f"export.min_agreement must be a number in [0, 1], got {min_agreement!r}")
    return float(min_agreement)


def check_agreement(reference: dict[str, np.ndarray], candidate: dict[str, np.ndarray], precision: str,
                    agreement: Callable | None = None, min_agreement: float | None = None) -> dict:
    """``{'agreement': {name: value}, 'min_agreement': threshold}``, or :class:`ExportCheckError` naming the
    output that agrees less than ``min_agreement`` (default ``MIN_AGREEMENT[precision]``).

    ``agreement``: the task's own measure ``agreement(reference, candidate) -> {name: value}`` (e.g. detections
    matched by IoU); default ``output_agreement`` per output. A value of ``None`` means "not measured" (e.g. no
    detections in either graph): it is reported as such and neither passes nor fails the threshold.
    """
    threshold = agreement_threshold(precision, min_agreement)
    if agreement is not None:
        values = {k: (None if v is None else float(v)) for k, v in agreement(reference, candidate).items()}
    else:
        values = {name: output_agreement(ref, candidate[name]) for name, ref in reference.items()}
    for name, value in values.items():
        if value is None:
            continue
        if not value >= threshold:
            raise ExportCheckError(
                f"the {precision.upper()} model agrees with the FP32 one on output {name!r} only {value:.4f} "
                f"(needed: {threshold:g}; set export.min_agreement to accept less)"
                + ("; calibrate on more images that look like the deployment data, or try --calib-method"
                   if precision == "int8" else ""))
    return {"agreement": values, "min_agreement": threshold}
