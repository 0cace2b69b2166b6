"""Exact resume: random-number-generator state travels with checkpoints.

mmengine restores weights, optimizer, schedulers and counters on ``--resume`` but re-seeds
the generators instead of restoring them, so dropout masks and augmentations after a resume
differ from an uninterrupted run. This hook stores the Python, NumPy and torch generator
states in every checkpoint and restores them on resume. It also makes validation neutral to
training randomness (states are put back after each validation), so an uninterrupted run
and a resumed one consume the generators identically.

Iteration-based loops (``IterBasedTrainLoop`` with ``InfiniteSampler``) keep one DataLoader iterator for
the whole run, while a resumed run starts a new one at the checkpoint: its workers are seeded from the
restored generator (one torch draw), the uninterrupted run's workers had long been running. So after
every checkpoint written inside a training iteration the training iterator is restarted at the same
sample position (the sampler fast-forwards, no data is loaded): both runs then draw the worker seeds
from the same state at the same iteration.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from mmengine.hooks import Hook

from oars.registry import HOOKS


def capture_rng_state() -> dict:
    """The state of every generator training draws from (as tensors/plain data: weights-only safe)."""
    np_state = np.random.get_state()
    py_version, py_keys, py_gauss = random.getstate()
    state = {
        "python": list(py_keys) + [-1 if py_gauss is None else py_gauss],
        "python_version": py_version,
        "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
        "numpy_pos": int(np_state[2]),
        "numpy_has_gauss": int(np_state[3]),
        "numpy_gauss": float(np_state[4]),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Put back what :func:`capture_rng_state` captured."""
    py = list(state["python"])
    gauss = py.pop()
    random.setstate((state["python_version"], tuple(int(v) for v in py), None if gauss == -1 else gauss))
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32), state["numpy_pos"],
                         state["numpy_has_gauss"], state["numpy_gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restart_train_iterator(loop, iters_done: int) -> bool:
    """Restart an iteration-based loop's DataLoader iterator at sample ``iters_done * batch_size``, as a
    resumed run starts it; returns whether it did. Only where the sampler can fast-forward (mmengine's
    ``InfiniteSampler.skip``): otherwise mmengine would load and discard the data of every iteration."""
    iterator = getattr(loop, "dataloader_iterator", None)
    resolve_sampler = getattr(iterator, "_resolve_sampler", None)
    resolve_batch = getattr(iterator, "_resolve_batch_size", None)
    if resolve_sampler is None or resolve_batch is None or resolve_sampler() is None or not resolve_batch():
        return False
    iterator.skip_iter(iters_done)  # absolute position; drops the iterator (workers end), rebuilt on next()
    return True


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save/restore generator states in checkpoints; keep validation from consuming them."""

    priority = "LOWEST"  # after CheckpointHook (VERY_LOW) in ``after_train_iter``

    def __init__(self) -> None:
        self._before_val: dict | None = None
        self._resumed: dict | None = None
        self._restart_loader = False

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        # mmengine re-saves the epoch checkpoint during validation when the best score improves;
        # the training-side state then is the one held aside at ``before_val``.
        state = self._before_val if self._before_val is not None else capture_rng_state()
        checkpoint.setdefault("meta", {})["rng_state"] = state
        self._restart_loader = self._before_val is None

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self._restart_loader:
            self._restart_loader = False
            restart_train_iterator(runner.train_loop, runner.iter + 1)

    def after_train_epoch(self, runner) -> None:
        self._restart_loader = False  # epoch checkpoints: the loop starts a new iterator each epoch anyway

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if getattr(runner, "_resume", False):
            self._resumed = checkpoint.get("meta", {}).get("rng_state")

    def before_train(self, runner) -> None:
        # Restored here, not at load time: mmengine's resume() re-seeds after loading when the
        # checkpoint's seed differs from the config's (always, with ``randomness.seed: null``).
        if self._resumed is not None:
            restore_rng_state(self._resumed)
            self._resumed = None

    def before_val(self, runner) -> None:
        self._before_val = capture_rng_state()

    def after_val(self, runner) -> None:
        if self._before_val is not None:
            restore_rng_state(self._before_val)
            self._before_val = None
