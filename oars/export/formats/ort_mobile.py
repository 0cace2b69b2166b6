"""ONNX Runtime's mobile format (``--format ort``): ``model.ort`` + ``required_operators.config``.

``python -m onnxruntime.tools.convert_onnx_models_to_ort`` (the tool ONNX Runtime ships for its mobile and
minimal builds) converts the graph deploy.yaml runs (``model.onnx``, or ``model_fp16.onnx`` / ``model_int8.onnx``
with --half / --int8: the precision is the core's, in the ONNX graph) with the 'Fixed' optimisation style, and
writes the operators a reduced ONNX Runtime build must include (``--include_ops_by_config``); the target platform
is ARM (phones and boards) unless ``export.ort.target_platform: amd64`` asks for x86, and ONNX Runtime on x86 runs
an ARM file too (the parity check does), INT8 ones slower.
``python -m onnxruntime.tools.check_onnx_model_mobile_usability`` then says whether NNAPI (Android) and CoreML
(iOS) can run the graph; its verdict is printed and kept in the result. Both run as subprocesses, as their authors
meant them to be run, so their logging and exit codes stay theirs.
"""

from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from oars.export.errors import ExportError
from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter, operators_in
from oars.export.formats.openvino import graph_operators

CONVERTER = "onnxruntime.tools.convert_onnx_models_to_ort"
USABILITY = "onnxruntime.tools.check_onnx_model_mobile_usability"
TOOL_TIMEOUT_S = 600
# export.ort.target_platform: the CPU the file is optimised for. The default is for phones and ARM boards; ONNX
# Runtime on x86 runs that file too (how its parity is checked here), but INT8 graphs optimised for ARM ran 1.8-6.4x
# slower than ONNX Runtime FP32 on x86, amd64 ones at the ONNX graph's speed (docs/deploy.md). "amd64" for x86.
TARGET_PLATFORMS = ("arm", "amd64")
DEFAULT_TARGET_PLATFORM = "arm"


class OrtMobileWriter(FormatWriter):
    """model.ort + required_operators.config, run by ``oars-infer --backend ort`` (ONNX Runtime)."""

    name = "ort"
    backend = "onnxruntime"
    infer_backend = "ort"
    model_key = "ort"
    packages = ("onnxruntime", "onnx")
    reduces_precision = False
    settings_keys = ("target_platform",)

    def check_settings(self, settings: Mapping[str, Any]) -> None:
        """``export.ort.target_platform`` is ``arm`` or ``amd64``.

        Raises:
            ExportError: another value, naming both.
        """
        target = settings.get("target_platform", DEFAULT_TARGET_PLATFORM)
        if target not in TARGET_PLATFORMS:
            raise ExportError(f"export.ort.target_platform must be one of {list(TARGET_PLATFORMS)} (the CPU the "
                              f"model.ort is optimised for), got {target!r}")

    def write(self, job: FormatJob) -> FormatFiles:
        """model.ort and required_operators.config of ``job.onnx_path`` in ``job.out_dir``, and the mobile-usability
        verdict as a note.

        Raises:
            ExportError: ONNX Runtime cannot load an operator of the graph (named), or the converter failed.
        """
        self.check_settings(job.settings)
        target = job.settings.get("target_platform", DEFAULT_TARGET_PLATFORM)
        out = osp.join(job.out_dir, "ort")
        os.makedirs(out, exist_ok=True)
        usability = start_tool(USABILITY, job.onnx_path)  # beside the conversion: each spends seconds starting up
        try:
            done = finish_tool(start_tool(CONVERTER, job.onnx_path, "--output_dir", out, "--optimization_style",
                                          "Fixed", "--target_platform", target))
        except BaseException:
            usability.kill()
            usability.wait()
            raise
        verdict = mobile_usability(finish_tool(usability))
        stem = osp.splitext(osp.basename(job.onnx_path))[0]
        ort_file, config = osp.join(out, f"{stem}.ort"), osp.join(out, f"{stem}.required_operators.config")
        if done.returncode != 0 or not osp.isfile(ort_file) or not osp.isfile(config):
            text = done.stdout + done.stderr
            lines = [ln for ln in text.splitlines() if "error" in ln.lower() or "fail" in ln.lower()]
            ops = operators_in("\n".join(lines), graph_operators(job.onnx_path))
            if ops:
                raise self.refuse_operators(ops, " (ONNX Runtime cannot load it)")
            raise ExportError(f"--format ort: {CONVERTER} failed on {osp.basename(job.onnx_path)} (exit "
                              f"{done.returncode}): {(lines[-1] if lines else text.strip()[-1000:])}")
        os.replace(ort_file, osp.join(job.out_dir, "model.ort"))
        with open(config) as f:  # its header names the staging folder: name the file beside it instead
            lines = [ln if not ln.startswith("# - ") else "# - model.ort\n" for ln in f]
        with open(osp.join(job.out_dir, "required_operators.config"), "w") as f:
            f.writelines(lines)
        return FormatFiles(main="model.ort", others=["required_operators.config"],
                           notes=[verdict, f"model.ort optimised for {target} CPUs (export.ort.target_platform)"])


def start_tool(module: str, *args: str) -> subprocess.Popen:
    """``python -m module args`` with this interpreter, started, its output captured (errors are read from it)."""
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish_tool(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    """Wait for a :func:`start_tool` process (at most ``TOOL_TIMEOUT_S``); its exit code and output."""
    try:
        out, err = proc.communicate(timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ExportError(f"--format ort: python {' '.join(proc.args[1:3])} did not finish within "
                          f"{TOOL_TIMEOUT_S} s") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def mobile_usability(done: subprocess.CompletedProcess) -> str:
    """One line from ONNX Runtime's usability check: its verdict for NNAPI and CoreML (``Model should perform well
    with X as is: YES/NO`` per execution provider) and its recommendation, or why the check could not run."""
    lines = [ln.split(":", 1)[-1].strip() for ln in (done.stdout + done.stderr).splitlines()]
    verdicts = [ln.replace("Model should perform well with ", "").replace(" as is", "") for ln in lines
                if ln.startswith("Model should perform well with")]
    advice = [ln for ln in lines if ln.startswith(("For optimal performance", "As NNAPI or CoreML"))]
    if done.returncode != 0 or not verdicts:
        return f"mobile usability check: could not run ({USABILITY} exit {done.returncode})"
    return "mobile usability: " + "; ".join(verdicts) + (f". {advice[-1]}" if advice else "")


ORT_MOBILE = OrtMobileWriter()
