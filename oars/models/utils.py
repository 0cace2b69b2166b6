"""Helpers every model shares: loading pretrained weights, freezing stages, argument checks."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import torch
from mmengine.logging import print_log
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from oars.engine.checkpoint import CheckpointError, load_checkpoint_file, state_dict_from_checkpoint

INIT_KEYS = ("checkpoint", "prefix", "strict")


class LoadReport(NamedTuple):
    """What ``load_pretrained`` did not load: keys the model has but the file lacks, keys the file has
    but the model lacks, and keys whose shapes differ (``key: file shape vs model shape``)."""

    missing: list[str]
    unexpected: list[str]
    mismatched: list[str]


def _short(keys: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


def _prefix_hint(own_keys: Iterable[str], file_keys: Iterable[str]) -> str:
    """Suggest a ``prefix`` when the file's keys are the model's keys under some parent name."""
    file_keys = list(file_keys)
    for key in own_keys:
        for fk in file_keys:
            if fk.endswith("." + key):
                return f"; did you mean prefix: {fk[: -len(key) - 1]!r}?"
        break
    return ""


def check_init(init: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validate an ``init`` argument (``{checkpoint: PATH, prefix, strict}`` or None) without reading the file:
    a misspelt key is a config error when the model is built, not when training starts."""
    if init is None:
        return None
    if not isinstance(init, dict):
        raise ValueError(f"init must be a dict like {{checkpoint: PATH}} or None, got {init!r}")
    unknown = sorted(set(init) - set(INIT_KEYS))
    if unknown:
        raise ValueError(f"init has unknown keys {unknown}; accepted: {list(INIT_KEYS)}")
    if not init.get("checkpoint"):
        raise ValueError(f"init needs a 'checkpoint' path, got {init!r}")
    return init


def load_pretrained(
    module: nn.Module, init: dict[str, Any] | None, skip_prefixes: Sequence[str] = ("fc.",)
) -> LoadReport | None:
    """Load ``init['checkpoint']`` into ``module`` (nothing when ``init`` is None).

    ``init`` keys: ``checkpoint`` (path, required), ``prefix`` (take only keys under it, e.g.
    ``backbone``), ``strict`` (default False: report missing/unexpected/mis-shaped keys as warnings
    and load the rest; True: raise on any). File keys under ``skip_prefixes`` that the module does not
    have (a classifier's ``fc.*``) are dropped silently. A file of which no key fits is always an error,
    because a silently un-initialised "pretrained" model is worse than a crash.
    """
    if check_init(init) is None:
        return None
    path, prefix, strict = str(init["checkpoint"]), init.get("prefix"), bool(init.get("strict", False))
    name = type(module).__name__

    state = state_dict_from_checkpoint(load_checkpoint_file(path), prefix)
    own = module.state_dict()
    state = {k: v for k, v in state.items() if k in own or not k.startswith(tuple(skip_prefixes))}
    if not any(k in own for k in state):
        raw = state_dict_from_checkpoint(load_checkpoint_file(path))
        raise CheckpointError(
            f"none of the {len(state)} keys in {path}"
            + (f" under prefix {prefix!r}" if prefix else "")
            + f" match {name}'s parameters (file keys: {_short(list(raw), 5)}; "
            f"model keys: {_short(list(own), 5)}){_prefix_hint(own, raw)}"
        )
    mismatched = [
        f"{k}: {tuple(v.shape)} vs {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and hasattr(v, "shape") and v.shape != own[k].shape
    ]
    state = {k: v for k, v in state.items() if not (k in own and hasattr(v, "shape") and v.shape != own[k].shape)}
    result = module.load_state_dict(state, strict=False)
    report = LoadReport(list(result.missing_keys), list(result.unexpected_keys), mismatched)

    problems = []
    if report.missing:
        problems.append(f"missing keys (kept at their initial values): {_short(report.missing)}")
    if report.unexpected:
        problems.append(f"unexpected keys (ignored): {_short(report.unexpected)}")
    if report.mismatched:
        problems.append(f"shape mismatches (file vs model, skipped): {_short(report.mismatched)}")
    if problems:
        msg = f"loading {path} into {name}: " + "; ".join(problems)
        if strict:
            raise CheckpointError(msg)
        print_log(msg, logger="current", level=logging.WARNING)
    return report


def freeze_module(module: nn.Module) -> None:
    """Stop gradients and put the module in eval mode (norm statistics stay fixed too)."""
    module.eval()
    for param in module.parameters():
        param.requires_grad = False


def set_norm_eval(module: nn.Module) -> None:
    """Put every batch-norm layer of ``module`` in eval mode (use running statistics)."""
    for m in module.modules():
        if isinstance(m, _BatchNorm):
            m.eval()


def check_out_indices(owner: str, out_indices: Sequence[int], num_stages: int) -> tuple[int, ...]:
    """Validate ``out_indices``: a non-empty, strictly increasing sequence within ``[0, num_stages)``."""
    try:
        indices = tuple(int(i) for i in out_indices)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: out_indices={out_indices!r} must be a sequence of ints") from None
    accepted = list(range(num_stages))
    if (
        not indices
        or any(i not in accepted for i in indices)
        or any(a >= b for a, b in zip(indices, indices[1:]))
    ):
        raise ValueError(
            f"{owner}: out_indices={list(out_indices)} is invalid; expected a non-empty, strictly increasing "
            f"sequence of stage indices from {accepted}"
        )
    return indices


def check_frozen_stages(owner: str, frozen_stages: int, num_stages: int) -> int:
    """Validate ``frozen_stages``: -1 (nothing), 0 (stem) ... ``num_stages`` (stem and every stage)."""
    if not isinstance(frozen_stages, int) or not -1 <= frozen_stages <= num_stages:
        raise ValueError(
            f"{owner}: frozen_stages={frozen_stages!r} is invalid; accepted: -1 (none), 0 (stem only) "
            f"to {num_stages} (stem and stages 1..{num_stages})"
        )
    return frozen_stages


def check_output_stride(owner: str, output_stride: int | None) -> int | None:
    """Validate ``output_stride``: None (no dilation), 8, 16 or 32."""
    if output_stride not in (None, 8, 16, 32):
        raise ValueError(f"{owner}: output_stride={output_stride!r} is not supported; accepted: None, 8, 16, 32")
    return output_stride


def labels_out_of_range(labels: torch.Tensor, num_classes: int, compiled_message: str) -> bool:
    """Whether any class id in ``labels`` lies outside ``[0, num_classes)``: the caller then raises its own message,
    which names the samples.

    Why one helper: in eager mode the answer needs the tensor's value in Python, which under ``torch.compile`` ends
    the graph at every training step (a graph break). Compiled, the check runs inside the graph instead
    (``torch._assert_async``) and raises ``RuntimeError(compiled_message)`` itself, without the sample names.

    Args:
        labels: int64 [N] class ids (N may be 0).
        num_classes: the number of classes C.
        compiled_message: the RuntimeError's text when compiled.

    Returns:
        True when a label is out of range (eager); False when all are in range, or when compiled.
    """
    in_range = ((labels >= 0) & (labels < num_classes)).all()
    if torch.compiler.is_compiling():
        torch._assert_async(in_range, compiled_message)
        return False
    return not bool(in_range)
