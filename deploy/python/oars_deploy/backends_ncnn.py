"""The ncnn backend: ``model.ncnn.param`` + ``model.ncnn.bin`` of ``tools/export.py --format ncnn``, named inputs
in, named outputs out, like every backend of :mod:`oars_deploy.backends`.

Why a loop over the batch: an ncnn ``Mat`` holds one image (C x H x W), and the export converts the graph at batch
1; each image of the batch is run by its own extractor and the outputs are stacked back into ``[B, ...]``.
Why FP16/BF16 storage and arithmetic are switched off: ncnn uses them by default where the CPU has them (ARM
boards), which would make the deployed model answer differently from what the export's parity check measured;
FP16 weights (``--half``) are widened when the model loads.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra

FEATURE = "--backend ncnn"


class NcnnBackend:
    """An ncnn network loaded from ``param_path`` and the ``.bin`` beside it (``model.ncnn.param`` ->
    ``model.ncnn.bin``); ``threads`` sets ncnn's CPU threads (default: ncnn's choice)."""

    def __init__(self, param_path: str, device: str = "cpu", threads: int | None = None) -> None:
        if device != "cpu":
            raise DeployError(f"{FEATURE} runs on the CPU; use --device cpu, not {device!r}")
        self.ncnn = ncnn = require_extra("ncnn", FEATURE)
        weights = param_path[:-len(".param")] + ".bin" if param_path.endswith(".param") else param_path + ".bin"
        for path in (param_path, weights):
            if not osp.isfile(path):
                raise DeployError(f"{FEATURE}: no ncnn model file {path}; export one with tools/export.py --format "
                                  "ncnn")
        self.net = ncnn.Net()
        opt = self.net.opt
        for flag in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
            setattr(opt, flag, False)
        if threads:
            opt.num_threads = int(threads)
        if self.net.load_param(param_path) != 0 or self.net.load_model(weights) != 0 or not self.net.input_names():
            raise DeployError(f"{FEATURE}: model file {param_path} (or {osp.basename(weights)} beside it) is damaged "
                              "or not an ncnn model this ncnn can run; re-export it with tools/export.py --format "
                              "ncnn")
        self.input_names = list(self.net.input_names())
        self.output_names = list(self.net.output_names())

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        feed = {k: np.ascontiguousarray(to_numpy(v), dtype=np.float32) for k, v in inputs.items()}
        unknown = set(feed) - set(self.input_names)
        if unknown:
            raise DeployError(f"the model has inputs {self.input_names}, not {sorted(unknown)}")
        batches = {len(v) for v in feed.values()}
        if len(batches) != 1:
            raise DeployError(f"{FEATURE}: the inputs have different batch sizes {sorted(batches)}")
        per_image: dict[str, list[np.ndarray]] = {name: [] for name in self.output_names}
        for i in range(batches.pop()):
            with self.net.create_extractor() as ex:
                for name, array in feed.items():
                    ex.input(name, self.ncnn.Mat(np.ascontiguousarray(array[i])).clone())
                for name in self.output_names:
                    status, mat = ex.extract(name)
                    if status != 0:
                        raise DeployError(f"{FEATURE}: ncnn could not compute output {name!r} (error {status})")
                    per_image[name].append(np.array(mat.numpy(), copy=True))
        return {name: np.stack(arrays) for name, arrays in per_image.items()}
