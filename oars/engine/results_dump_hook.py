"""``tools/eval.py --out results.json``: every test prediction written to one JSON file, in the task's record
format (:meth:`oars.task_roles.Data.result_records`: detection the COCO results format that ``pycocotools``' ``loadRes``
reads, as MMDetection's ``format_only``; segmentation and video one record per sample).

Why a hook: the predictions exist only inside the test loop (data samples with ``pred_*`` fields); converting each
batch as it comes keeps no model output in memory, only the small records. Task-neutral: the config's task
converts each sample, so the core names no task.
"""

from __future__ import annotations

import json
import os.path as osp
from typing import Any

from mmengine.hooks import Hook

from oars.errors import OarsError
from oars.registry import HOOKS


def check_out_file(path: str, overwrite: bool) -> None:
    """Refuse ``path`` before the (slow) test run: an existing file without ``overwrite``, a folder, or a missing
    parent folder.

    Raises:
        OarsError: naming ``--out``, the path and what to do.
    """
    if osp.isdir(path):
        raise OarsError(f"--out {path}: is a folder; give a file name such as results.json")
    if osp.exists(path) and not overwrite:
        raise OarsError(f"--out {path}: the file exists; give another name or --overwrite to replace it")
    parent = osp.dirname(osp.abspath(path))
    if not osp.isdir(parent):
        raise OarsError(f"--out {path}: the folder {parent} does not exist")


@HOOKS.register_module()
class ResultsDumpHook(Hook):
    """Collect the task's records of every test sample and write them as one JSON list to ``out_file``
    (atomically: a run that fails leaves no half-written file; samples in dataset order, also when distributed).

    Args:
        out_file: the JSON file.
        overwrite: replace an existing ``out_file`` (otherwise the run is refused before it starts).
    """

    priority = "LOW"

    def __init__(self, out_file: str, overwrite: bool = False) -> None:
        self.out_file = out_file
        self.overwrite = overwrite
        self._samples: list[list[dict]] = []
        self._data: Any = None
        self._meta: dict = {}

    def before_test(self, runner: Any) -> None:
        """Find the config's task and the test dataset's metainfo; refuse an existing file early."""
        from oars.tasks import get_task

        check_out_file(self.out_file, self.overwrite)
        self._data = get_task(runner.cfg.get("default_scope")).data(runner.cfg)  # its kind's data role
        self._meta = dict(getattr(runner.test_dataloader.dataset, "metainfo", {}) or {})
        self._samples = []

    def after_test_iter(self, runner: Any, batch_idx: int, data_batch: Any = None,
                        outputs: Any = None) -> None:
        """Convert each predicted data sample of the batch to its records."""
        for sample in outputs or []:
            try:
                self._samples.append(self._data.result_records(sample, self._meta))
            except (KeyError, ValueError) as err:
                raise OarsError(f"--out {self.out_file}: cannot make the record of a test sample: {err}") from None

    def after_test_epoch(self, runner: Any, metrics: dict | None = None) -> None:
        """Gather the records of all ranks in dataset order and write the file on rank 0."""
        from mmengine.dist import collect_results, get_world_size, is_main_process

        from oars_deploy.atomic import atomic_write

        samples = self._samples
        if get_world_size() > 1:
            samples = collect_results(samples, len(runner.test_dataloader.dataset), device="cpu")
        if is_main_process():
            records = [rec for recs in samples for rec in recs]
            atomic_write(self.out_file, json.dumps(records))
            runner.logger.info(f"{len(records)} prediction records of {len(samples)} samples written to "
                               f"{self.out_file}")
        self._samples = []
