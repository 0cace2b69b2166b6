"""NCNN (``--format ncnn``): ``model.ncnn.param`` + ``model.ncnn.bin`` converted from the exported ONNX graph by pnnx.

- pnnx reads the ONNX graph itself (``pnnx model.onnx inputshape=[1,3,H,W]``; no TorchScript trace); its binary
  ships in the ``pnnx`` wheel and is run as a subprocess with an argument list, nothing is downloaded. Its side
  files (the pnnx IR, the simplified ONNX graph, the Python scripts) stay in a scratch folder that is removed.
- ncnn runs one image at a time (a ``Mat`` is C x H x W): pnnx takes the first axis for the batch and writes a
  one-image graph, and the runtime loops over the batch (:mod:`oars_deploy.backends_ncnn`).
- pnnx names the blobs ``in0``/``out0``...; the param file is rewritten with the ONNX graph's input and output
  names, so the runtime maps names to names as every backend does.
- ``--half``: the weights stored in FP16 (pnnx ``fp16=1``; ncnn computes in FP32 where the CPU has no FP16
  arithmetic, and the runtime pins FP32 so that what runs is what the parity check measured). ``--int8`` is
  refused: ncnn's INT8 needs its ncnn2table / ncnn2int8 tools, which no wheel ships.
- Operators ncnn has no layer for (NMS, RoIAlign, TopK, ArgMax, comparisons, ...: :mod:`oars.export.formats.
  operators`) are refused before converting; a layer type pnnx leaves that ncnn cannot create is refused after.
"""

from __future__ import annotations

import os
import os.path as osp
import shutil
import subprocess
import tempfile

from oars.export.errors import ExportError
from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter
from oars.export.formats.operators import check_operators, refusal
from oars.extras import require_extra

PNNX_TIMEOUT_S = 600
PARAM, BIN = "model.ncnn.param", "model.ncnn.bin"
WHY = "pnnx writes no ncnn layer for them"


class NcnnWriter(FormatWriter):
    """model.ncnn.param + model.ncnn.bin (FP32 or FP16 weights), run by ``oars-infer --backend ncnn``."""

    name = "ncnn"
    backend = "ncnn"
    infer_backend = "ncnn"
    model_key = "ncnn"
    packages = ("pnnx", "ncnn")
    reduces_precision = True

    def require(self, precision: str = "fp32") -> None:
        """The packages (see :meth:`FormatWriter.require`), and no --int8.

        Raises:
            ExportError: a missing package (the pip command), or ``--int8``.
        """
        if precision == "int8":
            raise ExportError("--format ncnn --int8 is not supported: ncnn's INT8 models come from its ncnn2table "
                              "and ncnn2int8 tools, which the ncnn and pnnx wheels do not ship; use --format ncnn "
                              "--half (FP16 weights), or --int8 with --format mnn or openvino")
        super().require(precision)

    def write(self, job: FormatJob) -> FormatFiles:
        """model.ncnn.param/.bin of ``job.fp32_onnx_path`` in ``job.out_dir`` (FP16 weights for fp16).

        Raises:
            ExportError: an operator ncnn cannot hold (named, with the formats that can), a graph input without a
                fixed size, or pnnx failed.
        """
        self.require(job.precision)
        check_operators(self.name, job.fp32_onnx_path, WHY)
        pnnx = require_extra("pnnx", f"--format {self.name}")
        ncnn = require_extra("ncnn", f"--format {self.name}")
        inputs, outputs, shapes = graph_signature(job.fp32_onnx_path)
        scratch = tempfile.mkdtemp(prefix="pnnx-", dir=job.out_dir)
        # absolute: pnnx runs in the scratch folder, and out_dir may be relative (tools/export.py -o out)
        param, weights = osp.abspath(osp.join(job.out_dir, PARAM)), osp.abspath(osp.join(job.out_dir, BIN))
        try:
            src = osp.join(scratch, "model.onnx")
            shutil.copyfile(job.fp32_onnx_path, src)
            args = [pnnx.EXEC_PATH, "model.onnx", "inputshape=" + ",".join(shapes), f"ncnnparam={param}",
                    f"ncnnbin={weights}", f"fp16={int(job.precision == 'fp16')}"]
            try:
                done = subprocess.run(args, cwd=scratch, capture_output=True, text=True, errors="replace",
                                      timeout=PNNX_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise ExportError(f"--format ncnn: pnnx did not finish within {PNNX_TIMEOUT_S} s") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        try:
            if done.returncode != 0 or not osp.isfile(param) or not osp.isfile(weights):
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                raise ExportError(f"--format ncnn: pnnx failed on {osp.basename(job.fp32_onnx_path)} (exit "
                                  f"{done.returncode}): {' | '.join(tail)[:1000]}")
            with open(param) as f:
                lines = f.read().splitlines()
            missing = sorted({ln.split()[0] for ln in lines[2:]
                              if ln.strip() and ncnn.create_layer(ln.split()[0]) is None})
            if missing:
                raise refusal(self.name, missing, "pnnx left them as layer types ncnn cannot run")
            with open(param, "w") as f:
                f.write("\n".join(rename_blobs(lines, inputs, outputs)) + "\n")
        except BaseException:  # no half-made files, even where the writer runs outside a staging folder
            for path in (param, weights):
                if osp.exists(path):
                    os.remove(path)
            raise
        return FormatFiles(main=PARAM, others=[BIN])


def graph_signature(onnx_path: str) -> tuple[list[str], list[str], list[str]]:
    """The graph's input names, output names and pnnx ``inputshape`` entries (``[1,3,64,64]f32``: the graph's
    batch, 1 where it is dynamic; pnnx takes the first axis for the batch and writes a one-image ncnn graph).

    Raises:
        ExportError: an input whose size (other than the batch) is not fixed, not float32, or of more than 4
            dimensions (clips: ncnn crashed with a floating-point exception on them, killing the process).
    """
    onnx = require_extra("onnx", "--format ncnn")
    graph = onnx.load(onnx_path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    inputs, shapes = [], []
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if tensor.elem_type != onnx.TensorProto.FLOAT or any(d is None for d in dims[1:]):
            raise ExportError(f"--format ncnn needs float32 graph inputs of a fixed size (other than the batch); "
                              f"input {value.name!r} is {onnx.TensorProto.DataType.Name(tensor.elem_type)} "
                              f"{['?' if d is None else d for d in dims]}")
        if len(dims) > 4:  # a clip [N, T, C, H, W]: ncnn divided by zero on them
            raise ExportError(f"--format ncnn runs graphs of images (inputs of at most 4 dimensions, the batch "
                              f"included); input {value.name!r} has {len(dims)} {dims}: export this model with "
                              "--format onnx (ONNX Runtime), ort, openvino or mnn")
        inputs.append(value.name)
        shapes.append("[" + ",".join(str(d) for d in [dims[0] or 1, *dims[1:]]) + "]f32")
    return inputs, [o.name for o in graph.output], shapes


def rename_blobs(lines: list[str], inputs: list[str], outputs: list[str]) -> list[str]:
    """The param file's lines with pnnx's blob names ``in0``, ``out0``, ... replaced by the graph's input and output
    names (in the graph's order, as pnnx numbers them), in layer lines (``Type name n_in n_out blobs... k=v...``)."""
    names = {f"in{i}": n for i, n in enumerate(inputs)} | {f"out{i}": n for i, n in enumerate(outputs)}
    bad = [n for n in names.values() if not n or any(c.isspace() for c in n)]
    if bad:
        raise ExportError(f"--format ncnn: graph input/output names with spaces cannot be ncnn blob names: {bad}")
    renamed = list(lines[:2])
    for line in lines[2:]:
        parts = line.split()
        if len(parts) < 4:
            renamed.append(line)
            continue
        count = int(parts[2]) + int(parts[3])
        blobs = [names.get(b, b) for b in parts[4:4 + count]]
        renamed.append(" ".join([parts[0], parts[1], parts[2], parts[3], *blobs, *parts[4 + count:]]))
    return renamed


NCNN = NcnnWriter()
