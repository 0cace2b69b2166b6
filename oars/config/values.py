"""Value checks for the keys every run reads (data loaders, loop lengths, optimizer numbers).

Without them a wrong value fails far from its key: ``batch_size: 0`` inside the lazily built train
loop (two tracebacks), ``val_interval: 0`` as a ZeroDivisionError after a whole epoch,
``max_epochs: 0`` as "end should be larger than begin" from a scheduler, ``lr: fast`` as Python's
"'<=' not supported between float and str". Checked before anything is built, each message names
the file, the key, what was expected and what was given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from oars.config.registry_map import Path_

Describe = Callable[[Path_], tuple[str, str]]  # key path -> (file that set it, key text)
# A check returns None when the value is fine, else the description of what was expected.
Check = Callable[[Any], "str | None"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def positive_int(value: Any) -> str | None:
    return None if _is_int(value) and value > 0 else "a positive integer (1, 2, ...)"


def non_negative_int(value: Any) -> str | None:
    return None if _is_int(value) and value >= 0 else "a non-negative integer (0, 1, 2, ...)"


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def optional_positive_int(value: Any) -> str | None:
    return None if value is None else positive_int(value)


def non_negative_number(value: Any) -> str | None:
    return None if _is_number(value) and value >= 0 else "a non-negative number (e.g. 0.01 or 1e-4)"


def positive_number(value: Any) -> str | None:
    return None if _is_number(value) and value > 0 else "a positive number (e.g. 1e-8)"


def unit_interval(value: Any) -> str | None:
    return None if _is_number(value) and 0 <= value <= 1 else "a number from 0 to 1 (e.g. 0.9)"


def betas(value: Any) -> str | None:
    ok = isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) and 0 <= v < 1 for v in value)
    return None if ok else "two numbers in [0, 1), e.g. [0.9, 0.999]"


_LOADER_KEYS: dict[str, Check] = {
    "batch_size": positive_int,
    "num_workers": non_negative_int,
    "persistent_workers": boolean,
    "pin_memory": boolean,
    "drop_last": boolean,
    "prefetch_factor": optional_positive_int,
}
_TRAIN_LOOP_KEYS: dict[str, Check] = {
    "max_epochs": positive_int,
    "max_iters": positive_int,
    "val_interval": positive_int,
    "val_begin": non_negative_int,
}
_OPTIMIZER_KEYS: dict[str, Check] = {
    "lr": non_negative_number,
    "weight_decay": non_negative_number,
    "momentum": unit_interval,
    "dampening": unit_interval,
    "eps": positive_number,
    "betas": betas,
    "alpha": non_negative_number,
}
_HOOK_KEYS: dict[str, Check] = {"interval": positive_int}

# Why a check matters, where the bare expectation would not say it.
_WHY = {
    ("train_cfg", "val_interval"): " (validate every N epochs or iterations; to validate rarely, use a large N)",
    ("train_cfg", "max_epochs"): " (the number of epochs to train)",
    ("train_cfg", "max_iters"): " (the number of iterations to train)",
}


def _check_keys(node: Any, path: Path_, checks: Mapping[str, Check], describe: Describe) -> list[str]:
    if not isinstance(node, Mapping):
        return []
    problems = []
    for key, check in checks.items():
        if key not in node:
            continue
        expected = check(node[key])
        if expected is not None:
            where, text = describe((*path, key))
            why = _WHY.get((*path, key), "")
            problems.append(f"{where}: {text}: expected {expected}{why}, got {node[key]!r}")
    return problems


def optimizer_nodes(optim_wrapper: Any) -> list[tuple[Path_, Mapping]]:
    """The optimizer dicts of ``optim_wrapper``: its ``optimizer``, or each wrapper's in a dict of wrappers (GANs)."""
    if not isinstance(optim_wrapper, Mapping):
        return []
    if "optimizer" in optim_wrapper or "type" in optim_wrapper:
        found = [(("optim_wrapper", "optimizer"), optim_wrapper.get("optimizer"))]
    else:
        found = [(("optim_wrapper", name, "optimizer"), w.get("optimizer"))
                 for name, w in optim_wrapper.items() if isinstance(w, Mapping)]
    return [(p, n) for p, n in found if isinstance(n, Mapping)]


def value_problems(data: Mapping, describe: Describe) -> list[str]:
    """Messages for the well-known keys of ``data`` (a plain config dict) whose values cannot work."""
    problems: list[str] = []
    for key, node in data.items():
        if isinstance(key, str) and key.endswith("_dataloader"):
            problems += _check_keys(node, (key,), _LOADER_KEYS, describe)
    problems += _check_keys(data.get("train_cfg"), ("train_cfg",), _TRAIN_LOOP_KEYS, describe)
    for path, node in optimizer_nodes(data.get("optim_wrapper")):
        problems += _check_keys(node, path, _OPTIMIZER_KEYS, describe)
    hooks = data.get("default_hooks")
    if isinstance(hooks, Mapping):
        for name, hook in hooks.items():
            problems += _check_keys(hook, ("default_hooks", name), _HOOK_KEYS, describe)
    return problems
