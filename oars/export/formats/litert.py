"""LiteRT / TensorFlow Lite (``--format litert``): ``model.tflite`` (+ ``litert_layout.json``) converted from the
exported ONNX graph by onnx2tf, in a virtual environment of its own.

- Why its own environment: onnx2tf pins TensorFlow 2.19, NumPy 1.26, onnx 1.19 and onnxruntime 1.23, which the main
  environment must not get (:mod:`oars.export.formats.isolated_env` creates it on first use under the cache folder;
  ``pip install oars`` never pulls TensorFlow). The runtime side needs only ``ai-edge-litert``.
- FP32: onnx2tf's ``model_float32.tflite``; FP16 (``--half``): its ``model_float16.tflite`` (weights stored in FP16,
  the interpreter computes in FP32 on the CPU). INT8 is refused (not built: the ONNX and OpenVINO INT8 paths are).
- onnx2tf downloads a sample-image file for its own accuracy checks when none is in its working folder; nothing may
  download at run time, so the writer puts a synthetic one there (:func:`write_sample_images`).
- Layout: onnx2tf writes channels-last models; the runtime backend transposes the inputs by the interpreter's input
  details and the outputs by ``litert_layout.json``, which this writer fills from the ONNX graph's output shapes
  (:mod:`oars_deploy.backends_litert`).
- Detections: the exported detectors give ``boxes`` and ``scores`` as separate outputs, so pixel coordinates never
  share a tensor (and a quantisation range) with scores. A graph with NonMaxSuppression inside is refused before
  converting (:data:`REFUSED_OPS`): onnx2tf converts the detectors' decode + NMS graphs, but no tested one ran as
  ONNX Runtime does (FCOS: detections recall 0.082, scores ~50x too large; SSDLite 0.758; YOLOv3 and Mask R-CNN:
  onnx2tf failed), while the same detectors' raw head maps (``export.postprocess=raw``: the runtime decodes them
  and runs NMS) agree with ONNX Runtime to 1e-5; the refusal names that flag.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import re
import shutil

import numpy as np

from oars.export.errors import ExportError
from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter, operators_in
from oars.export.formats.isolated_env import ANSI, IsolatedEnv, last_error_line
from oars.export.formats.openvino import graph_operators
from oars.export.formats.operators import refusal
from oars.extras import require_extra
from oars_deploy.backends_litert import LAYOUT_FILE, layout_permutation

# onnx2tf pins every package it needs exactly (tensorflow 2.19.0, numpy 1.26.4, onnx 1.19.1, onnxruntime 1.23.0,
# ai-edge-litert 2.1.0, ...); TensorFlow 2.19 has wheels for Python 3.9-3.12
CONVERTER_ENV = IsolatedEnv(name="litert", requirements=("onnx2tf==1.29.24", "tensorflow==2.19.0"),
                            feature="--format litert", python_versions=((3, 9), (3, 10), (3, 11), (3, 12)))
CONVERT_TIMEOUT_S = 900
OUTPUT_FILES = {"fp32": "model_float32.tflite", "fp16": "model_float16.tflite"}
# how onnx2tf names an operator it cannot convert: "FancyOp OP is not yet implemented", "onnx_op_type: RoiAlign"
UNCONVERTED = re.compile(r"(\S+) OP is not yet implemented|onnx_op_type:\s*(\S+)")
SAMPLE_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"  # the name onnx2tf looks for in its cwd
# operators whose converted graphs disagreed with ONNX Runtime (see the module docstring): refused before converting
REFUSED_OPS = frozenset({"NonMaxSuppression"})
REFUSED_WHY = ("onnx2tf converts them, but the converted decode + NMS graphs of the tested detectors disagree with "
               "ONNX Runtime or fail to convert")


class LiteRTWriter(FormatWriter):
    """model.tflite (FP32 or FP16 weights) + litert_layout.json, run by ``oars-infer --backend litert``."""

    name = "litert"
    backend = "litert"
    infer_backend = "litert"
    model_key = "litert"
    packages = ("ai_edge_litert", "onnx")
    reduces_precision = True

    def require(self, precision: str = "fp32") -> None:
        """Refuse --int8, a Python without TensorFlow wheels, or a missing runtime package, before any work.

        Raises:
            ExportError: one line saying which and what to do.
        """
        if precision == "int8":
            raise ExportError("--format litert --int8 is not supported (onnx2tf's integer quantisation is not "
                              "wired in); use --format litert --half (FP16 weights), or --int8 with --format "
                              "onnx, openvino or ort")
        super().require(precision)
        CONVERTER_ENV.check_python()

    def write(self, job: FormatJob) -> FormatFiles:
        """model.tflite of ``job.fp32_onnx_path`` at ``job.precision`` and its layout file in ``job.out_dir``.

        Raises:
            ExportError: an operator onnx2tf cannot convert (named), the converter environment could not be built,
                or the conversion failed (its last error line).
        """
        refused = sorted(set(graph_operators(job.fp32_onnx_path)) & REFUSED_OPS)
        if refused:
            raise refusal(self.name, refused, REFUSED_WHY)
        work = osp.join(job.out_dir, "onnx2tf")
        os.makedirs(work, exist_ok=True)
        write_sample_images(osp.join(work, SAMPLE_FILE))
        # onnx2tf overwrites its input with its simplified graph: give it a copy (the staged model.onnx is a hard
        # link to the export's own file)
        shutil.copyfile(job.fp32_onnx_path, osp.join(work, "model.onnx"))
        done = CONVERTER_ENV.run(["-m", "onnx2tf", "-i", "model.onnx", "-o", "saved_model", "-coion", "-n"],
                                 cwd=work, timeout_s=CONVERT_TIMEOUT_S)
        produced = osp.join(work, "saved_model", OUTPUT_FILES[job.precision])
        if done.returncode != 0 or not osp.isfile(produced):
            raise self.conversion_error(done.returncode, done.stdout + done.stderr, job.fp32_onnx_path)
        os.replace(produced, osp.join(job.out_dir, "model.tflite"))
        flex = flex_operators(osp.join(job.out_dir, "model.tflite"))
        if flex:
            raise self.refuse_operators(flex, " (onnx2tf wrote them as TensorFlow Select ops, which need the Flex "
                                              "delegate that ai-edge-litert does not ship)")
        layout = output_layout(osp.join(job.out_dir, "model.tflite"), job.fp32_onnx_path)
        with open(osp.join(job.out_dir, LAYOUT_FILE), "w") as f:
            f.write(json.dumps({"outputs": layout}) + "\n")
        return FormatFiles(main="model.tflite", others=[LAYOUT_FILE])

    def conversion_error(self, code: int, text: str, onnx_path: str) -> ExportError:
        """The one message of a failed conversion: the operators onnx2tf names as unconverted (``X OP is not yet
        implemented``, ``onnx_op_type: X``), else its last error line."""
        text = ANSI.sub("", text)
        named = [m.group(1) or m.group(2) for m in UNCONVERTED.finditer(text)]
        ops = operators_in(" ".join(named), graph_operators(onnx_path))
        if ops:
            return self.refuse_operators(ops, " (onnx2tf has no TensorFlow conversion for it)")
        return ExportError(f"--format litert: onnx2tf failed on {osp.basename(onnx_path)} (exit {code}): "
                           f"{last_error_line(text)}")


def flex_operators(tflite_path: str) -> list[str]:
    """The TensorFlow Select ("Flex") ops of a ``.tflite`` file (e.g. ``CropAndResize``): the LiteRT interpreter
    refuses them when it allocates its tensors, so such a model would not run anywhere ``ai-edge-litert`` runs.
    Empty when the interpreter is not installed (the parity check then names the missing package)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return []
    try:
        Interpreter(model_path=tflite_path).allocate_tensors()
    except RuntimeError as err:
        return sorted(set(re.findall(r"Flex(\w+)", str(err))))
    return []


def write_sample_images(path: str) -> str:
    """The 20 x 128 x 128 x 3 float32 images in [0, 1] that onnx2tf would download for its own checks: a fixed
    random set (it only feeds them to both graphs); returns ``path``."""
    np.save(path, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    return path


def output_layout(tflite_path: str, onnx_path: str) -> dict[str, list[int]]:
    """Output name -> the permutation from the LiteRT model's output to the ONNX graph's layout (identity for the
    outputs onnx2tf kept as they were). An output whose shape fits both (``[1, 4, 4, 4]``) is decided by running the
    model next to ONNX Runtime (:func:`measured_layout`): by shape alone FCOS's ``reg_1`` at 64 px was taken as
    channels-first and disagreed.

    Raises:
        ExportError: an output is missing or its shape is no layout of the ONNX one (the converter changed it).
    """
    interpreter = require_extra("ai_edge_litert.interpreter", "--format litert")
    model = interpreter.Interpreter(model_path=tflite_path)
    signatures = model.get_signature_list()
    runner = model.get_signature_runner(next(iter(signatures)))
    shapes = {name: [int(d) for d in detail.get("shape_signature", detail["shape"])]
              for name, detail in runner.get_output_details().items()}
    layout, ambiguous = {}, {}
    for name, onnx_shape in onnx_output_shapes(onnx_path).items():
        if name not in shapes:
            raise ExportError(f"--format litert: the LiteRT model has no output {name!r}; it has {sorted(shapes)}")
        produced = [max(d, 1) for d in shapes[name]]
        perm = layout_permutation(produced, onnx_shape)
        if perm is None:
            raise ExportError(f"--format litert: output {name!r} has shape {shapes[name]} in the LiteRT model, "
                              f"which is no layout of the ONNX graph's {onnx_shape}")
        layout[name] = perm
        # channels last -> first fits too (the same shape in both layouts): decided by running the model
        back = [0, len(onnx_shape) - 1, *range(1, len(onnx_shape) - 1)]
        if len(onnx_shape) >= 3 and back != perm and all(t < 1 or produced[p] == t for p, t in zip(back, onnx_shape)):
            ambiguous[name] = [perm, back]
    if ambiguous:
        layout.update(measured_layout(tflite_path, onnx_path, ambiguous))
    return layout


def measured_layout(tflite_path: str, onnx_path: str, ambiguous: dict[str, list[list[int]]]) -> dict[str, list[int]]:
    """Output name -> the permutation, among those its shape allows, that maps the LiteRT output onto ONNX Runtime's
    on one random input: for an output whose shape is the same in both layouts (channels = height = width, e.g. a
    ``[1, 4, 4, 4]`` map), which shapes alone cannot decide."""
    import onnxruntime as ort

    from oars_deploy.backends_litert import LiteRTBackend

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal([d if isinstance(d, int) and d > 0 else 1 for d in i.shape]).astype(
        np.float32) for i in session.get_inputs()}
    reference = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    produced = LiteRTBackend(tflite_path)(feeds)  # no layout file yet: the outputs as the model gives them
    return {name: pick_permutation(perms, produced[name], reference[name]) for name, perms in ambiguous.items()}


def pick_permutation(perms: list[list[int]], produced: np.ndarray, reference: np.ndarray) -> list[int]:
    """The permutation of ``perms`` after which ``produced`` is closest to ``reference`` (max abs difference)."""
    errors = [float(np.abs(np.asarray(produced).transpose(p) - reference).max()) for p in perms]
    return perms[int(np.argmin(errors))]


def onnx_output_shapes(onnx_path: str) -> dict[str, list[int]]:
    """The ONNX graph's outputs and their shapes (-1 for a dynamic dimension)."""
    onnx = require_extra("onnx", "--format litert")
    graph = onnx.load(onnx_path, load_external_data=False).graph
    return {o.name: [d.dim_value if d.HasField("dim_value") else -1 for d in o.type.tensor_type.shape.dim]
            for o in graph.output}


LITERT = LiteRTWriter()
