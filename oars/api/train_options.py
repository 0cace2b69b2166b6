"""``Model.train``'s keyword arguments in ultralytics' names as ``-o`` overrides of the config's own keys.

``epochs`` -> ``train_cfg.max_epochs``; ``batch`` -> ``train_dataloader.batch_size`` (training only: evaluation
keeps its batch); ``lr0`` -> ``optim_wrapper.optimizer.lr``; ``workers`` -> ``num_workers`` of every dataloader;
``imgsz`` -> the ``scale`` of every fixed-size resize step of every dataloader's pipeline. ``amp``, ``resume`` and
``exist_ok`` are not config keys: they are ``tools/train.py``'s ``--amp``, ``--resume`` and ``--overwrite``, passed to
:func:`oars.pipelines.train.train` as those flags are.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from oars.errors import OarsError

LOADERS = ("train_dataloader", "val_dataloader", "test_dataloader")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OarsError(f"Model.train({name}={value!r}): expected a whole number of 1 or more")
    return value


def train_overrides(cfg: Any, epochs: int | None = None, batch: int | None = None, imgsz: int | None = None,
                    lr0: float | None = None, workers: int | None = None) -> list[str]:
    """The overrides for the arguments given (None: the config's value kept).

    Args:
        cfg: the loaded config (the keys are looked up in it, so a config without them gets a message here).

    Returns:
        ``['train_cfg.max_epochs=3', ...]``.

    Raises:
        OarsError: a value out of range, or a config without the key the argument sets (naming both).
    """
    out: list[str] = []
    if epochs is not None:
        _positive_int("epochs", epochs)
        if "max_epochs" not in (cfg.get("train_cfg") or {}):
            raise OarsError(f"Model.train(epochs={epochs}): {cfg.filename}'s train_cfg has no max_epochs (it counts "
                            "iterations: give train_cfg__max_iters=N)")
        out.append(f"train_cfg.max_epochs={epochs}")
    if batch is not None:
        _positive_int("batch", batch)
        if not cfg.get("train_dataloader"):
            raise OarsError(f"Model.train(batch={batch}): {cfg.filename} has no train_dataloader")
        out.append(f"train_dataloader.batch_size={batch}")
    if lr0 is not None:
        if isinstance(lr0, bool) or not isinstance(lr0, (int, float)) or lr0 <= 0:
            raise OarsError(f"Model.train(lr0={lr0!r}): expected a learning rate above 0")
        optimizer = (cfg.get("optim_wrapper") or {}).get("optimizer") or {}
        if "lr" not in optimizer:
            raise OarsError(f"Model.train(lr0={lr0}): {cfg.filename} has no optim_wrapper.optimizer.lr")
        out.append(f"optim_wrapper.optimizer.lr={json.dumps(float(lr0))}")
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise OarsError(f"Model.train(workers={workers!r}): expected 0 (load in the main process) or more")
        out.extend(f"{name}.num_workers={workers}" for name in LOADERS if cfg.get(name))
    if imgsz is not None:
        out.extend(resize_overrides(cfg, imgsz, "Model.train"))
    return out


def resize_overrides(cfg: Any, imgsz: int | Sequence[int], caller: str,
                     loaders: Sequence[str] = LOADERS) -> list[str]:
    """``scale=[w, h]`` for every resize step whose ``scale`` is one size (``[w, h]`` or a number) in the pipelines of
    ``loaders`` (every dataloader by default); random multi-scale steps (a list of sizes) are left alone.

    Raises:
        OarsError: a bad size, or no such step anywhere.
    """
    if isinstance(imgsz, bool):
        raise OarsError(f"{caller}(imgsz={imgsz!r}): expected a size in pixels or [width, height]")
    size = [imgsz, imgsz] if isinstance(imgsz, int) else list(imgsz) if isinstance(imgsz, (list, tuple)) else []
    if len(size) != 2 or not all(isinstance(s, int) and s >= 1 for s in size):
        raise OarsError(f"{caller}(imgsz={imgsz!r}): expected a size in pixels or [width, height]")
    out = []
    for name in loaders:
        steps = (((cfg.get(name) or {}).get("dataset") or {}).get("pipeline")) or []
        for i, step in enumerate(steps):
            scale = step.get("scale") if isinstance(step, Mapping) else None
            if isinstance(scale, int) or (isinstance(scale, (list, tuple)) and len(scale) == 2
                                          and all(isinstance(s, (int, float)) for s in scale)):
                out.append(f"{name}.dataset.pipeline.{i}.scale={json.dumps(size)}")
    if not out:
        raise OarsError(f"{caller}(imgsz={imgsz!r}): {cfg.filename} has no fixed-size resize step (a pipeline "
                        "step with scale: [w, h]), so imgsz does not apply to this model")
    return out


def api_message(message: str) -> str:
    """A message of the engine naming ``tools/train.py``'s flags, with the API's arguments in their place (the
    refused work dir: ``--resume`` is ``resume=True``, ``--overwrite`` is ``exist_ok=True``)."""
    for flag, arg in (("--work-dir <new folder>", "work_dir=<new folder>"), ("--resume", "resume=True"),
                      ("--overwrite", "exist_ok=True"), ("--work-dir", "work_dir=")):
        message = message.replace(flag, arg)
    return message


def check_train_device(device: str | None) -> None:
    """``train(device=...)``: training runs where mmengine puts it (CUDA when the machine has it), so a device is
    checked against the machine rather than silently ignored."""
    if device is None:
        return
    import torch

    has_cuda = torch.cuda.is_available()
    if str(device).startswith("cuda") and not has_cuda:
        raise OarsError(f"Model.train(device={device!r}): CUDA is not available on this machine; give device='cpu'")
    if device == "cpu" and has_cuda:
        raise OarsError("Model.train(device='cpu'): this machine has CUDA, which training uses; to train on the CPU "
                        "start Python with CUDA_VISIBLE_DEVICES= set empty")
    if device != "cpu" and not str(device).startswith("cuda"):
        raise OarsError(f"Model.train(device={device!r}): expected 'cpu' or 'cuda'")


def data_argument(fn: Any, data: str, what: str) -> str:
    """``data`` for ``fn`` (train / evaluate), when that pipeline takes a dataset description file."""
    if "data" not in inspect.signature(fn).parameters:
        raise OarsError(f"Model.{what}(data={data!r}): dataset description files are not supported by this oars "
                        f"version's {fn.__module__}.{fn.__name__}; set the loaders with overrides instead")
    return data
