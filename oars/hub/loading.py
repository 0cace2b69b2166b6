"""Loading a hub name: the file fetched (or found) and checked, converted by its entry's converter, and, for
``load_from``, put into the model with the parameters whose shapes differ (a head for another class count) skipped
and listed in the log.

``oars.engine.checkpoint.load_checkpoint_file`` calls :func:`load_hub_checkpoint` for hub names (so backbones'
``init: {checkpoint: torchvision://resnet50}``, ``tools/eval.py -w`` and mmengine's ``CheckpointLoader`` schemes all
take this one path), and ``OarsRunner.load_checkpoint`` calls :func:`load_into_runner` for ``load_from``. The file
itself is read by :func:`oars.checkpoint_file.load_local_checkpoint`, below both: the engine imports this module.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from mmengine.logging import print_log
from torch import nn

from oars.checkpoint_file import load_local_checkpoint

from .converters import get_converter
from .download import HubError, fetch
from .entries import HubEntry, resolve
from .local import local_file


def hub_file(name: str, progress: bool = False) -> tuple[HubEntry, str]:
    """The entry of ``name`` and its file on this machine (downloaded into the hub cache when missing), its sha256
    checked: every load of a hub name goes through here (:func:`oars.hub.verify.check_hash`).

    Args:
        name: ``torchvision://<builder>[.<member>]`` or ``oars://<name>``.
        progress: show a progress bar while downloading.

    Returns:
        (entry, path).

    Raises:
        HubError / HubUnavailableError: an unknown name, or a file that cannot be fetched (URL and path given).
        WeightsHashError: the file (cached, downloaded, placed by hand or registered) fails its hash check.
    """
    entry = resolve(name)
    if entry.url is None:
        return entry, local_file(entry.name.partition("://")[2])
    return entry, fetch(entry.url, hash_prefix=entry.sha256, progress=progress, name=entry.name)


def load_hub_checkpoint(name: str, map_location: Any = "cpu") -> Any:
    """The checkpoint ``name`` stands for, converted into our parameter names when its entry has a converter.

    Args:
        name: a hub name.
        map_location: as ``torch.load``'s.

    Returns:
        the loaded file as it is (no converter: e.g. a torchvision backbone's state dict, or a registered oars
        checkpoint), or ``{'state_dict': converted, 'meta': {'source': name, 'converter': ..., 'url': ...}}``.

    Raises:
        HubError: see :func:`hub_file`; a converter that rejects the file (message names entry and converter).
        CheckpointError: an unreadable file.
    """
    entry, path = hub_file(name, progress=sys.stderr.isatty())  # a long download on a terminal shows its progress
    raw = load_local_checkpoint(path, map_location)
    if entry.converter is None:
        return raw
    converter = get_converter(entry.converter)
    try:
        state = converter(raw)
    except (ValueError, KeyError) as err:
        raise HubError(f"{entry.name} ({path}): converter {entry.converter!r} cannot convert it: {err}") from None
    return {"state_dict": dict(state), "meta": {"source": entry.name, "converter": entry.converter, "url": entry.url}}


def drop_mismatched(model: nn.Module, checkpoint: Mapping[str, Any], source: str,
                    logger: str | logging.Logger = "current") -> tuple[dict[str, Any], list[str]]:
    """Remove the tensors whose shape differs from the model's, and log them (a fine-tuned model's head for another
    class count cannot take the published head; everything else still loads).

    Args:
        model: the model that will receive the state dict.
        checkpoint: ``{'state_dict': ...}`` or a bare state dict.
        source: the name the log message gives.
        logger: where the list goes (mmengine's current logger: the run's log file).

    Returns:
        (the checkpoint with those tensors removed, the ``key: file shape vs model shape`` lines).
    """
    has_state = isinstance(checkpoint.get("state_dict"), Mapping)
    state = dict(checkpoint["state_dict"] if has_state else checkpoint)
    own = model.state_dict()
    skipped = [f"{k}: {tuple(v.shape)} vs {tuple(own[k].shape)}" for k, v in state.items()
               if k in own and hasattr(v, "shape") and tuple(v.shape) != tuple(own[k].shape)]
    for line in skipped:
        state.pop(line.partition(":")[0])
    if skipped:
        print_log(f"load_from {source}: {len(skipped)} parameters skipped because their shapes differ from the "
                  "model's (file vs model; e.g. a head for another number of classes, trained from its initial "
                  "values):\n  " + "\n  ".join(skipped), logger=logger, level=logging.WARNING)
    out = dict(checkpoint) if has_state else {}
    out["state_dict"] = state
    return out, skipped


def load_into_runner(runner: Any, filename: str, map_location: Any = "cpu", strict: bool = False) -> Any:
    """``Runner.load_checkpoint`` for a hub name: fetched, converted, mismatched shapes skipped and listed unless
    ``strict`` (evaluation: a model that does not fit is an error), then mmengine's own loading and hooks.

    Args:
        runner: the mmengine Runner (``OarsRunner``).
        filename: the hub name (``load_from``).
        map_location: as ``torch.load``'s.
        strict: refuse any missing, unexpected or mis-shaped key.

    Returns:
        the checkpoint loaded (after conversion and skipping).
    """
    from mmengine.model import is_model_wrapper
    from mmengine.runner.checkpoint import _load_checkpoint_to_model

    checkpoint = load_hub_checkpoint(filename, map_location)
    runner.call_hook("after_load_checkpoint", checkpoint=checkpoint)
    model = runner.model.module if is_model_wrapper(runner.model) else runner.model
    if not strict:
        checkpoint, _ = drop_mismatched(model, checkpoint, filename, logger=runner.logger)
    checkpoint = _load_checkpoint_to_model(model, checkpoint, strict)
    runner._has_loaded = True
    runner.logger.info(f"Load checkpoint from {filename}")
    return checkpoint
