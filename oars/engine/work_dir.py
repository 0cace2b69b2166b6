"""The checkpoints of a work dir: which one to resume from, and not mixing two runs in one folder.

A second ``tools/train.py`` into a folder that holds a run's checkpoints would overwrite ``epoch_1.pth``,
``best_*`` and ``config.yaml`` and move ``last_checkpoint`` back, leaving two runs mixed; training refuses
unless it resumes (``--resume``) or is told to start afresh (``--overwrite``).
"""

from __future__ import annotations

import logging
import os
import os.path as osp
import re

from mmengine.logging import print_log

from oars_deploy.atomic import remove_stale_temp_files

from .checkpoint import CheckpointError, checkpoint_meta, verify_checkpoint

_STEP_NAME = re.compile(r"^(epoch|iter)_(\d+)\.pth$")
_BEST_NAME = re.compile(r"^best_.+\.pth$")
POINTER = "last_checkpoint"


def run_files(work_dir: str) -> list[str]:
    """The files in ``work_dir`` that belong to a training run's checkpoints (sorted names, not paths)."""
    if not osp.isdir(work_dir):
        return []
    return sorted(n for n in os.listdir(work_dir)
                  if (n == POINTER or _STEP_NAME.match(n) or _BEST_NAME.match(n)) and osp.isfile(osp.join(work_dir, n)))


def guard_work_dir(work_dir: str, *, resume: bool, overwrite: bool) -> list[str]:
    """Refuse to start a fresh run over another run's checkpoints; with ``overwrite`` delete them first.

    Args:
        work_dir: the run's folder.
        resume: the run continues the checkpoints (``--resume``): nothing to guard.
        overwrite: delete ``epoch_N.pth``/``iter_N.pth``/``best_*.pth``/``last_checkpoint`` before training
            (logs, ``config.yaml`` and evaluation outputs stay; the new run rewrites ``config.yaml``).

    Returns:
        the deleted paths.

    Raises:
        CheckpointError: checkpoints are there and neither ``resume`` nor ``overwrite`` was given.
    """
    found = [] if resume else run_files(work_dir)
    if not found:
        return []
    if not overwrite:
        shown = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
        raise CheckpointError(
            f"{work_dir} already holds a run's checkpoints ({shown}); training again there would overwrite them "
            "and mix the two runs. Use --resume to continue that run, --work-dir <new folder> to start another, "
            "or --overwrite to delete those checkpoints and start afresh")
    removed = []
    for name in found:
        path = osp.join(work_dir, name)
        if osp.exists(path):  # another rank may have removed it already
            os.remove(path)
            removed.append(path)
    if removed:
        print_log(f"--overwrite: deleted {len(removed)} file(s) of the previous run in {work_dir}: "
                  f"{', '.join(osp.basename(p) for p in removed)}", logger="current")
    return removed


def clean_stale_temp_files(folder: str) -> list[str]:
    """Remove what a killed run's atomic writes left in ``folder`` (logged, so nothing disappears unseen)."""
    removed = remove_stale_temp_files(folder)
    if removed:
        print_log(f"removed {len(removed)} temporary file(s) a killed run left in {folder}: "
                  f"{', '.join(osp.basename(p) for p in removed)}", logger="current")
    return removed


def _pointer_target(work_dir: str) -> str | None:
    """The file ``last_checkpoint`` names, if it exists (a moved work dir is looked up by file name)."""
    pointer = osp.join(work_dir, POINTER)
    if not osp.isfile(pointer):
        return None
    with open(pointer) as f:
        named = f.read().strip()
    if not named:
        return None
    for candidate in (named, osp.join(work_dir, osp.basename(named))):
        if osp.isfile(candidate):
            return candidate
    return None


def _by_iteration(work_dir: str) -> tuple[list[tuple[int, float, str]], list[str]]:
    """``epoch_N``/``iter_N`` files with their meta iteration, newest first, and the unreadable ones."""
    readable, unreadable = [], []
    for name in os.listdir(work_dir):
        if not _STEP_NAME.match(name):
            continue
        path = osp.join(work_dir, name)
        meta = checkpoint_meta(path)
        if meta is None:
            unreadable.append(path)
        else:
            step = meta.get("iter")
            readable.append((int(step) if isinstance(step, int) else -1, osp.getmtime(path), path))
    readable.sort(reverse=True)
    return readable, sorted(unreadable)


def latest_checkpoint(work_dir: str) -> str | None:
    """The checkpoint to resume from: the one ``last_checkpoint`` names, or, when that pointer is missing,
    empty or stale, the ``epoch_N``/``iter_N`` file with the highest training iteration (read from its meta,
    not from the number in its name: ``epoch_3`` can be iteration 30 and ``iter_50`` iteration 50).

    Raises:
        CheckpointError: without a pointer, when the checkpoints that cannot be read are newer than every
            readable one (one of them was probably the latest), or when none can be read.
    """
    if not osp.isdir(work_dir):
        return None
    named = _pointer_target(work_dir)
    if named is not None:
        return named
    readable, unreadable = _by_iteration(work_dir)
    if not readable:
        if unreadable:
            raise CheckpointError(f"{work_dir}: no readable checkpoint to resume from; truncated or corrupt: "
                                  f"{', '.join(unreadable)}")
        return None
    best = readable[0][2]
    newer_bad = [p for p in unreadable if osp.getmtime(p) > readable[0][1]]
    if newer_bad:
        raise CheckpointError(
            f"{work_dir}: {', '.join(newer_bad)} cannot be read (truncated or corrupt) and is newer than the "
            f"newest intact checkpoint {best}; resume from that one with --resume {best}, or move the damaged "
            "file(s) away")
    for path in unreadable:
        print_log(f"skipping {path}: truncated or corrupt", logger="current", level=logging.WARNING)
    return best


def resume_checkpoint(work_dir: str) -> str | None:
    """:func:`latest_checkpoint`, verified (zip CRCs); a damaged latest checkpoint is an error that names the
    previous intact one instead of a resume that fails later with nonsense losses."""
    latest = latest_checkpoint(work_dir)
    if latest is None:
        return None
    try:
        return verify_checkpoint(latest)
    except CheckpointError as err:
        previous = _previous_intact(work_dir, latest)
        hint = (f"the previous intact one is {previous}: resume from it with --resume {previous}"
                if previous else "no other intact checkpoint is in the work dir")
        raise CheckpointError(f"--resume: {err}; {hint}") from None


def _previous_intact(work_dir: str, bad: str) -> str | None:
    """The newest ``epoch_N``/``iter_N`` other than ``bad`` whose CRCs verify."""
    readable, _ = _by_iteration(work_dir)
    for _, _, path in readable:
        if osp.abspath(path) == osp.abspath(bad):
            continue
        try:
            return verify_checkpoint(path)
        except CheckpointError:
            continue
    return None


def prepare_work_dir(work_dir: str, *, resume: bool, overwrite: bool) -> None:
    """Before training: :func:`guard_work_dir` and removal of a killed run's temporary files.

    Under several processes only the main one deletes; the others still refuse (they see the same files), and
    wait until it has cleaned: a temporary file another process is writing there (the work dir's write probe)
    would otherwise be taken for a killed run's and removed under it.
    """
    from mmengine.dist import barrier, is_main_process

    main = is_main_process()
    if main or not overwrite:
        guard_work_dir(work_dir, resume=resume, overwrite=overwrite)
    if main:
        clean_stale_temp_files(work_dir)
    barrier()  # no-op in a single process
