"""mmengine's CheckpointHook with the order of a safe rotation: write the new file, then delete the old one.

mmengine deletes the oldest ``epoch_N.pth`` (``max_keep_ckpts``) and the previous ``best_*.pth`` *before*
saving the new one, and writes ``last_checkpoint`` with a plain ``open(..., 'w')``; a kill or a full disk in
between leaves fewer checkpoints than promised, or a torn pointer. Here the old files go only after the new
checkpoint is complete, and the pointer is written atomically.
"""

from __future__ import annotations

import os.path as osp
from contextlib import contextmanager

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook

from oars.registry import HOOKS
from oars_deploy.atomic import atomic_write


class _DeferredRemoval:
    """A file backend whose ``remove``/``rmtree`` are recorded instead of done (everything else passes)."""

    def __init__(self, backend, pending: list[str]):
        self._backend, self._pending = backend, pending

    def remove(self, path) -> None:
        self._pending.append(str(path))

    def rmtree(self, path) -> None:
        self._pending.append(str(path))

    def __getattr__(self, name):
        return getattr(self._backend, name)


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """``CheckpointHook`` (same arguments) that removes expired checkpoints only after the new one is written.

    ``resolve._make_checkpoints_atomic`` puts it in place of ``default_hooks.checkpoint`` of type
    ``CheckpointHook``, with the atomic file backend.
    """

    @contextmanager
    def _removals_after(self):
        """Defer the parent's deletions to the end of the block, skipping any file the block (re)wrote."""
        pending: list[str] = []
        backend = self.file_backend
        self.file_backend = _DeferredRemoval(backend, pending)
        try:
            yield
        finally:
            self.file_backend = backend
        keep = {osp.abspath(p) for p in self._current_paths()}
        for path in pending:
            if osp.abspath(path) in keep:
                continue
            if backend.isfile(path):
                backend.remove(path)
            elif backend.isdir(path):  # deepspeed saves folders
                backend.rmtree(path)

    def _current_paths(self) -> list[str]:
        paths = [getattr(self, "last_ckpt", None), getattr(self, "best_ckpt_path", None)]
        paths += list(getattr(self, "best_ckpt_path_dict", {}).values())
        return [p for p in paths if p]

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        """mmengine's version, reordered: save, publish ``last_checkpoint`` atomically, then expire the oldest."""
        expired = None
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step):
            if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
                expired = self.keep_ckpt_ids.popleft()
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info("keep_ckpt_ids", list(self.keep_ckpt_ids))
        ckpt_filename = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, ckpt_filename)
        runner.message_hub.update_info("last_ckpt", self.last_ckpt)
        runner.save_checkpoint(self.out_dir, ckpt_filename, self.file_client_args,
                               save_optimizer=self.save_optimizer, save_param_scheduler=self.save_param_scheduler,
                               meta=meta, by_epoch=self.by_epoch, backend_args=self.backend_args, **self.args)
        if not is_main_process():
            return
        atomic_write(osp.join(runner.work_dir, "last_checkpoint"), self.last_ckpt)
        if expired is not None:
            old = self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(expired))
            if osp.abspath(old) != osp.abspath(self.last_ckpt):
                if self.file_backend.isfile(old):
                    self.file_backend.remove(old)
                elif self.file_backend.isdir(old):  # deepspeed saves folders
                    self.file_backend.rmtree(old)

    def _save_best_checkpoint(self, runner, metrics) -> None:
        """mmengine's version, with the previous ``best_*`` removed after the new one is written."""
        with self._removals_after():
            super()._save_best_checkpoint(runner, metrics)
