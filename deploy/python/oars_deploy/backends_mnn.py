"""The MNN backend: ``model.mnn`` of ``tools/export.py --format mnn`` run by MNN's module API on the CPU, named
inputs in, named outputs out, like every backend of :mod:`oars_deploy.backends`.

Why high precision: MNN computes in FP16 or BF16 where the CPU has it unless asked for ``precision: high``, which
would make the deployed model answer differently from what the export's parity check measured (FP16 and 8-bit
weights are widened when the model loads). Why integer outputs are widened to int64 and integer inputs narrowed to
int32: MNN holds int64 tensors as int32, and the ONNX graphs' indices and labels are int64. Why the console is muted
while MNN loads: the wheel prints its CPU features (``The device supports: ...``) and precision to stdout from native
code.
"""

from __future__ import annotations

import contextlib
import os
import os.path as osp
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra

FEATURE = "--backend mnn"


class MnnBackend:
    """An MNN model loaded by ``MNN.nn.load_module_from_file`` with its own input and output names; ``threads``
    sets MNN's CPU threads (default: MNN's own)."""

    def __init__(self, model_path: str, device: str = "cpu", threads: int | None = None) -> None:
        if device != "cpu":
            raise DeployError(f"{FEATURE} runs on the CPU; use --device cpu, not {device!r}")
        if not osp.isfile(model_path):
            raise DeployError(f"{FEATURE}: no MNN model {model_path}; export one with tools/export.py --format mnn")
        with _stdout_muted():
            mnn = require_extra("MNN", FEATURE)
            config: dict[str, Any] = {"precision": "high", "backend": "CPU"}
            if threads:
                config["numThread"] = int(threads)
            try:
                info = mnn.nn.load_module_from_file(model_path, [], []).get_info()
                self.input_names = list(info["inputNames"])
                self.output_names = list(info["outputNames"])
                runtime = mnn.nn.create_runtime_manager((config,))
                self.module = mnn.nn.load_module_from_file(model_path, self.input_names, self.output_names,
                                                           runtime_manager=runtime)
            except Exception as err:  # MNN raises bare Exceptions / RuntimeErrors without a common class
                reason = f"{type(err).__name__}: {str(err)[:300]}"
                raise DeployError(f"{FEATURE}: model file {model_path} is damaged or not an MNN model ({reason}); "
                                  "re-export it with tools/export.py --format mnn") from None
            if self.module is None or not self.input_names:
                raise DeployError(f"{FEATURE}: model file {model_path} is damaged or not an MNN model; re-export it "
                                  "with tools/export.py --format mnn")
        self.expr = mnn.expr

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        feed = {k: np.ascontiguousarray(to_numpy(v)) for k, v in inputs.items()}
        unknown = set(feed) - set(self.input_names)
        missing = set(self.input_names) - set(feed)
        if unknown or missing:
            raise DeployError(f"the model has inputs {self.input_names}, not {sorted(feed)}")
        expr = self.expr
        args = [_const(expr, feed[n]) for n in self.input_names]
        results = self.module.onForward(args)
        outputs = {}
        for name, var in zip(self.output_names, results):
            if var.data_format == expr.NC4HW4:
                var = expr.convert(var, expr.NCHW)
            array = np.array(var.read(), copy=True)
            outputs[name] = array.astype(np.int64) if np.issubdtype(array.dtype, np.integer) else array
        return outputs


def _const(expr: Any, array: np.ndarray) -> Any:
    """An MNN constant of one input: integer inputs (a conditional generator's class labels) as int32, the width
    MNN holds int64 in (its ``const`` reads every array as float32 unless told), the rest as float32."""
    if np.issubdtype(array.dtype, np.integer):
        return expr.const(np.ascontiguousarray(array, dtype=np.int32), list(array.shape), expr.NCHW, expr.int)
    return expr.const(np.ascontiguousarray(array, dtype=np.float32), list(array.shape), expr.NCHW)


@contextlib.contextmanager
def _stdout_muted() -> Iterator[None]:
    """File descriptor 1 to /dev/null (native code's prints included), restored afterwards."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
