"""The keys of the sections mmengine's Runner builds itself, checked against what it passes them to.

The registry check (``oars.config.check``) covers every dict with a ``type``; the Runner also builds sections
that have none, or whose keys go somewhere else than the ``type``'s class:

- ``*_dataloader``: mmengine pops ``dataset``, ``sampler``, ``batch_sampler``, ``collate_fn``, ``worker_init_fn``,
  ``num_batch_per_epoch`` and ``disable_subprocess_warning``, then calls ``torch.utils.data.DataLoader(**rest)``.
  Unchecked, ``batch_sizee: 2`` failed only when the training loop built its loader, hundreds of log lines later,
  as a ``TypeError`` naming ``train_cfg``;
- ``train_cfg`` without ``type`` (``by_epoch`` picks ``EpochBasedTrainLoop`` or ``IterBasedTrainLoop``),
  ``val_cfg`` / ``test_cfg`` without ``type`` (``ValLoop`` / ``TestLoop``), ``log_processor`` without ``type``
  (``LogProcessor``), ``optim_wrapper`` without ``type`` (``OptimWrapper``);
- ``env_cfg``, ``randomness`` and ``auto_scale_lr``: read by the Runner key by key.

Each unknown key is one message with the file that set it, the key path, the closest accepted names and the
accepted list, the way the registry check words it. The accepted names come from the signatures (``inspect``), so
a new torch or mmengine argument is accepted without editing this file.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from oars.config.arguments import accepted_arguments
from oars.config.registry_lookup import closest
from oars.config.values import Describe

# What mmengine's Runner.build_dataloader takes out of a loader's dict before calling DataLoader(**rest).
_LOADER_POPPED = ("dataset", "sampler", "batch_sampler", "collate_fn", "worker_init_fn", "num_batch_per_epoch",
                  "disable_subprocess_warning")
# Arguments the Runner supplies itself when it builds a loop; a config never sets them.
_LOOP_SUPPLIED = ("runner", "dataloader", "evaluator")
# Keys of the sections the Runner reads one by one (mmengine 0.10: Runner.setup_env, set_randomness, scale_lr).
_ENV_KEYS = ("cudnn_benchmark", "mp_cfg", "dist_cfg", "resource_limit")
_AUTO_SCALE_LR_KEYS = ("enable", "base_batch_size")


def _dataloader_arguments() -> list[str]:
    from torch.utils.data import DataLoader

    names = [n for n in inspect.signature(DataLoader.__init__).parameters if n != "self"]
    return names + [n for n in _LOADER_POPPED if n not in names]


def _randomness_arguments() -> list[str]:
    from mmengine.runner import Runner

    return [n for n in inspect.signature(Runner.set_randomness).parameters if n != "self"]


def _class_arguments(cls: Any, extra: tuple[str, ...] = ()) -> list[str] | None:
    accepted = accepted_arguments(cls)
    if accepted is None:
        return None
    return [n for n in accepted if n not in _LOOP_SUPPLIED] + list(extra)


def _typeless_class(key: str, section: Mapping) -> tuple[str, Callable[[], list[str] | None]] | None:
    """(class name, its accepted keys) of a section the Runner builds without a ``type``; None if not one."""
    if "type" in section:
        return None
    if key == "train_cfg":
        from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

        loop = EpochBasedTrainLoop if section.get("by_epoch", True) else IterBasedTrainLoop
        return loop.__name__, lambda: _class_arguments(loop, ("by_epoch",))
    if key in ("val_cfg", "test_cfg"):
        from mmengine.runner import TestLoop, ValLoop

        loop = ValLoop if key == "val_cfg" else TestLoop
        return loop.__name__, lambda: _class_arguments(loop)
    if key == "log_processor":
        from mmengine.runner import LogProcessor

        return "LogProcessor", lambda: _class_arguments(LogProcessor)
    if key == "optim_wrapper" and "optimizer" in section:
        from mmengine.optim import OptimWrapper

        return "OptimWrapper", lambda: _class_arguments(OptimWrapper, ("constructor", "paramwise_cfg"))
    return None


def _unknown_keys(section: Mapping, path: tuple, owner: str, accepted: list[str], describe: Describe) -> list[str]:
    problems = []
    for arg in section:
        if arg in accepted or arg == "_scope_":
            continue
        where, key = describe((*path, arg))
        near = closest(str(arg), accepted)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        problems.append(f"{where}: {key}: {owner} has no argument {arg!r}.{hint} Accepted: {', '.join(accepted)}")
    return problems


def section_problems(data: Mapping, describe: Describe) -> list[str]:
    """Messages for the unknown keys of the sections the Runner builds itself (see the module docstring).

    Args:
        data: the plain config dict.
        describe: key path -> (file that set it, key text).

    Returns:
        One message per unknown key; empty when every key is accepted.
    """
    problems: list[str] = []
    for key, section in data.items():
        if not isinstance(key, str) or not isinstance(section, Mapping):
            continue  # wrong shapes are reported by oars.config.structure
        if key.endswith("_dataloader"):
            owner = "the data loader (torch.utils.data.DataLoader, built by mmengine's Runner)"
            problems += _unknown_keys(section, (key,), owner, _dataloader_arguments(), describe)
        elif key == "env_cfg":
            problems += _unknown_keys(section, (key,), "env_cfg (mmengine's Runner.setup_env)", list(_ENV_KEYS),
                                      describe)
        elif key == "randomness":
            problems += _unknown_keys(section, (key,), "randomness (mmengine's Runner.set_randomness)",
                                      _randomness_arguments(), describe)
        elif key == "auto_scale_lr":
            problems += _unknown_keys(section, (key,), "auto_scale_lr (mmengine's Runner.scale_lr)",
                                      list(_AUTO_SCALE_LR_KEYS), describe)
        else:
            found = _typeless_class(key, section)
            accepted = found[1]() if found else None
            if found and accepted is not None:
                problems += _unknown_keys(section, (key,), found[0], accepted, describe)
    return problems
