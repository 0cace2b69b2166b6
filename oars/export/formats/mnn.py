"""MNN (``--format mnn``): ``model.mnn`` converted from the exported ONNX graph by MNN's converter.

- The converter is the ``MNN`` wheel's native one (``_tools.mnnconvert``, what ``mnnconvert -f ONNX --modelFile
  model.onnx --MNNModel model.mnn --bizCode oars`` runs), in a subprocess of this interpreter with an argument
  list: a crash of the native code stays there, and its console output is read for errors. Why not ``python -m
  MNN.tools.mnnconvert``: that wrapper imports ``MNN.tools.utils.log``, which runs ``pip install -U
  aliyun-log-python-sdk`` in a shell when that package is missing and sends usage logs (the machine's id) to
  Alibaba Cloud after each conversion; an export must neither install packages nor phone home.
- ``--half``: ``--fp16``, the weights stored in FP16 (computed in FP32: the runtime asks MNN for high precision).
- ``--int8``: ``--weightQuantBits 8``, 8-bit weights only: the weights are stored as int8 (about 4x smaller
  files) and de-quantised when the model loads; activations stay in float, so it is not faster, and the
  calibration files (--calib-dir) serve only the parity check.
- An operator the converter does not support (``These Op Not Support: ONNX::X``) is one message naming it.
"""

from __future__ import annotations

import os
import os.path as osp
import re
import subprocess
import sys
import tempfile

from oars.export.errors import ExportError
from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter
from oars.export.formats.operators import check_operators, refusal

CONVERT_TIMEOUT_S = 600
MODEL = "model.mnn"
# the native converter alone (see the module docstring); argv[0] is the program name it expects
CONVERT_CODE = "import sys, _tools; _tools.mnnconvert(sys.argv)"
PRECISION_FLAGS = {"fp32": [], "fp16": ["--fp16"], "int8": ["--weightQuantBits", "8"]}
NOT_SUPPORTED = re.compile(r"These Op Not Support:\s*(.*)")
WHY = "MNN's converter has no rule for them"


class MnnWriter(FormatWriter):
    """model.mnn (FP32, FP16 weights or 8-bit weights), run by ``oars-infer --backend mnn``."""

    name = "mnn"
    backend = "mnn"
    infer_backend = "mnn"
    model_key = "mnn"
    packages = ("MNN",)
    reduces_precision = True

    def write(self, job: FormatJob) -> FormatFiles:
        """model.mnn of ``job.fp32_onnx_path`` at ``job.precision`` in ``job.out_dir``.

        Raises:
            ExportError: an operator MNN cannot convert (named, with the formats that can), or the converter failed.
        """
        self.require(job.precision)
        check_operators(self.name, job.fp32_onnx_path, WHY)
        target = osp.abspath(osp.join(job.out_dir, MODEL))
        args = [sys.executable, "-c", CONVERT_CODE, "-f", "ONNX", "--modelFile", osp.abspath(job.fp32_onnx_path),
                "--MNNModel", target, "--bizCode", "oars", *PRECISION_FLAGS[job.precision]]
        try:
            # in a scratch folder: the converter writes a side file (.__convert_external_data.bin) into its working
            # folder, which must not be the user's
            with tempfile.TemporaryDirectory(prefix="mnnconvert-") as scratch:
                done = subprocess.run(args, capture_output=True, text=True, errors="replace",
                                      timeout=CONVERT_TIMEOUT_S, cwd=scratch)
        except subprocess.TimeoutExpired:
            raise ExportError(f"--format mnn: MNN's converter did not finish within {CONVERT_TIMEOUT_S} s") from None
        text = done.stdout + done.stderr
        if "Converted Success" not in text and osp.exists(target):  # no half-made file
            os.remove(target)
        unsupported = [op.split("::")[-1] for m in NOT_SUPPORTED.finditer(text) for op in m.group(1).split()]
        if unsupported:
            raise refusal(self.name, unsupported, WHY)
        if done.returncode != 0 or "Converted Success" not in text or not osp.isfile(target):
            lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("The device supports")]
            raise ExportError(f"--format mnn: MNN's converter failed on {osp.basename(job.fp32_onnx_path)} (exit "
                              f"{done.returncode}): {' | '.join(lines[-3:])[:1000]}")
        return FormatFiles(main=MODEL)


MNN_FORMAT = MnnWriter()
