"""Experiment-tracker backends: mmengine's MLflow, W&B and ClearML backends, plus the run's files at the end.

mmengine's backends log the config (as parameters) and the scalars of every logging interval; at ``close()``
they upload whatever in the work dir matches a suffix list, which for a work dir holding a local tracking store
(``<work_dir>/mlruns``) or a ``wandb/`` folder means the tracker's own files. These subclasses keep mmengine's
behaviour and replace that scan with the files a run is judged by (:func:`run_artifacts`): ``config.yaml``, the
run's log, ``report.html``, a bounded number of pictures and the best checkpoint (else the last one).
``oars.engine.tracking`` adds them to ``visualizer.vis_backends`` (``tools/train.py --logger NAME``).
"""

from __future__ import annotations

import glob
import logging
import os
import os.path as osp
import re
import time
from typing import Any

from mmengine.logging import print_log
from mmengine.visualization import ClearMLVisBackend, MLflowVisBackend, WandbVisBackend
from mmengine.visualization.vis_backend import force_init_env

from oars.registry import VISBACKENDS

PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
_TRACKER_DIRS = {"mlruns", "wandb", "tensorboard"}  # trackers' own stores: never uploaded as run files
_NUMBERED = re.compile(r"^(epoch|iter)_(\d+)\.pth$")
_PARAM_NAME = re.compile(r"[^A-Za-z0-9_\-. :/]")  # what MLflow does not accept in a parameter name


def run_stamp(save_dir: str | None) -> str:
    """The run's timestamp (``YYYYmmdd_HHMMSS``), used as the tracked run's name.

    Args:
        save_dir: the backend's ``save_dir``; mmengine's Runner makes it ``<work_dir>/<timestamp>/vis_data``.

    Returns:
        The ``<timestamp>`` folder name, or the current time when ``save_dir`` does not have that layout.
    """
    if save_dir and osp.basename(osp.normpath(save_dir)) == "vis_data":
        return osp.basename(osp.dirname(osp.normpath(save_dir)))
    return time.strftime("%Y%m%d_%H%M%S", time.localtime())


def run_checkpoint(work_dir: str) -> str | None:
    """The checkpoint a finished run is remembered by: the newest ``best_*.pth``, else the last one saved.

    Args:
        work_dir: the run's work dir.

    Returns:
        A path, or None when the run saved no checkpoint.
    """
    best = sorted(glob.glob(osp.join(work_dir, "best_*.pth")), key=osp.getmtime)
    if best:
        return best[-1]
    pointer = osp.join(work_dir, "last_checkpoint")  # mmengine writes the last saved path here
    if osp.isfile(pointer):
        with open(pointer, encoding="utf-8") as f:
            last = f.read().strip()
        if last and osp.isfile(last):
            return last
    numbered = [(int(m.group(2)), name) for name in os.listdir(work_dir) if (m := _NUMBERED.match(name))]
    return osp.join(work_dir, max(numbered)[1]) if numbered else None


def run_artifacts(work_dir: str, log_dir: str | None, max_pictures: int = 32) -> list[tuple[str, str]]:
    """The files a tracked run uploads when it ends, each with the artifact folder it goes into.

    Args:
        work_dir: the run's work dir.
        log_dir: ``<work_dir>/<timestamp>`` of this run (its ``.log`` and ``vis_data/scalars.json``), or None.
        max_pictures: at most this many pictures from the work dir's ``pictures/`` folders (sorted by path), so a
            large evaluation does not upload thousands of files.

    Returns:
        ``(path, artifact_folder)`` pairs, ``artifact_folder`` ``""`` for the top level; only existing files.
    """
    out: list[tuple[str, str]] = []
    for name in ("config.yaml", "report.html", "metrics.json"):
        if osp.isfile(osp.join(work_dir, name)):
            out.append((osp.join(work_dir, name), ""))
    if log_dir and osp.isdir(log_dir):
        for path in sorted(glob.glob(osp.join(log_dir, "*.log")) + glob.glob(osp.join(log_dir, "vis_data", "*.json"))):
            out.append((path, "logs"))
    pictures: list[str] = []
    for root, dirs, files in os.walk(work_dir):
        dirs[:] = sorted(d for d in dirs if d not in _TRACKER_DIRS)
        if "pictures" in osp.relpath(root, work_dir).split(os.sep):
            pictures.extend(osp.join(root, f) for f in sorted(files) if f.lower().endswith(PICTURE_SUFFIXES))
    for path in pictures[:max(0, max_pictures)]:
        out.append((path, osp.dirname(osp.relpath(path, work_dir))))
    checkpoint = run_checkpoint(work_dir) if osp.isdir(work_dir) else None
    if checkpoint:
        out.append((checkpoint, "checkpoints"))
    return out


def _warn(tracker: str, error: Exception) -> None:
    print_log(f"{tracker}: could not upload the run's files: {error}", logger="current", level=logging.WARNING)


@VISBACKENDS.register_module()
class OarsMLflowVisBackend(MLflowVisBackend):
    """mmengine's MLflow backend with a local file store, the run named by its timestamp, and the run's files.

    Args:
        save_dir: set by the Runner (``<work_dir>/<timestamp>/vis_data``); names the run.
        store_dir: the local file store (``<work_dir>/mlruns``; ``mlflow ui --backend-store-uri <store_dir>``),
            used when ``tracking_uri`` is None.
        max_pictures: pictures uploaded at the end (:func:`run_artifacts`).
        **kwargs: mmengine's ``MLflowVisBackend`` arguments (``exp_name``, ``run_name``, ``tracking_uri``, ...).
    """

    def __init__(self, save_dir: str, store_dir: str | None = None, max_pictures: int = 32, **kwargs: Any) -> None:
        kwargs.setdefault("run_name", run_stamp(save_dir))
        super().__init__(save_dir, **kwargs)
        self._store_dir = store_dir
        self._max_pictures = max_pictures

    def _init_env(self) -> None:
        """mmengine's set-up against ``store_dir``: it builds a ``file://`` store from ``save_dir`` when no
        ``tracking_uri`` is given (a given URI would log 'make sure that the mlflow server is running')."""
        # MLflow 3 refuses a file store unless told it is wanted; it is what works with mlflow-skinny alone.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        run_dir = self._save_dir
        if self._tracking_uri is None and self._store_dir:
            self._save_dir = osp.abspath(self._store_dir)
        try:
            super()._init_env()
        finally:
            self._save_dir = run_dir

    @force_init_env
    def add_config(self, config, **kwargs) -> None:  # noqa: ANN001 (mmengine's signature)
        """The config as the run's parameters (flattened keys, as mmengine's) and ``config.py``.

        MLflow refuses a parameter name outside ``[A-Za-z0-9_\\-. :/]``; a config key with another character (a
        class name used as a key) would end the run before training, so such characters become ``_``.
        """
        self.cfg = config
        tracked = config.to_dict()
        if self._tracked_config_keys is not None:
            tracked = {k: tracked[k] for k in self._tracked_config_keys}
        params = {_PARAM_NAME.sub("_", k): v for k, v in self._flatten(tracked).items()}
        try:
            self._mlflow.log_params(params)
            self._mlflow.log_text(config.pretty_text, "config.py")
        except self._mlflow.MlflowException as error:
            print_log(f"MLflow: could not log the config: {error}", logger="current", level=logging.WARNING)

    def close(self) -> None:
        """Upload :func:`run_artifacts` (instead of mmengine's suffix scan of the whole work dir) and end the run."""
        if not hasattr(self, "_mlflow"):
            return
        work_dir = getattr(getattr(self, "cfg", None), "work_dir", None)
        if work_dir and osp.isdir(work_dir):
            try:
                for path, folder in run_artifacts(work_dir, osp.dirname(self._save_dir), self._max_pictures):
                    self._mlflow.log_artifact(path, folder or None)
            except Exception as error:  # noqa: BLE001 - a tracker failure must not fail a finished run
                _warn("MLflow", error)
        self._mlflow.end_run()


@VISBACKENDS.register_module()
class OarsWandbVisBackend(WandbVisBackend):
    """mmengine's W&B backend: offline unless ``WANDB_MODE`` says otherwise, the run named by its timestamp,
    and the run's files logged as one artifact at the end.

    Args:
        save_dir: set by the Runner (``<work_dir>/<timestamp>/vis_data``); names the run.
        init_kwargs: ``wandb.init`` arguments (``project``, ``dir``, ``mode``...). A ``WANDB_MODE`` environment
            variable replaces ``mode``, so ``WANDB_MODE=online`` uploads without editing the config.
        max_pictures: pictures logged at the end (:func:`run_artifacts`).
        log_code: also upload the current directory's ``.py`` files (``wandb.run.log_code``; slow, off).
        **kwargs: mmengine's ``WandbVisBackend`` arguments.
    """

    def __init__(self, save_dir: str, init_kwargs: dict | None = None, max_pictures: int = 32,
                 log_code: bool = False, **kwargs: Any) -> None:
        init_kwargs = dict(init_kwargs or {})
        init_kwargs.setdefault("name", run_stamp(save_dir))
        if os.environ.get("WANDB_MODE"):
            init_kwargs.pop("mode", None)  # wandb.init's argument would win over the environment
        if init_kwargs.get("dir"):
            os.makedirs(init_kwargs["dir"], exist_ok=True)
        super().__init__(save_dir, init_kwargs=init_kwargs, **kwargs)
        self._max_pictures = max_pictures
        self._log_code = log_code

    @force_init_env
    def add_config(self, config, **kwargs) -> None:  # noqa: ANN001 (mmengine's signature)
        """The config as the run's W&B config, remembered for :meth:`close` (its work dir).

        mmengine's also calls ``run.log_code()``, which walks the whole current directory (a virtual environment
        included: a minute here) and copies every ``.py`` file into the run; ``log_code: true`` asks for it.
        """
        self.cfg = config
        allow = bool((self._init_kwargs or {}).get("allow_val_change", False))
        self._wandb.config.update(config.to_dict(), allow_val_change=allow)
        if self._log_code:
            self._wandb.run.log_code(name=self._log_code_name)

    def close(self) -> None:
        """Log :func:`run_artifacts` as one ``run-files`` artifact (referenced in place, not copied), then finish."""
        if not hasattr(self, "_wandb"):
            return
        work_dir = getattr(getattr(self, "cfg", None), "work_dir", None)
        if work_dir and osp.isdir(work_dir) and self._wandb.run is not None:
            try:
                artifact = self._wandb.Artifact(f"run-files-{self._wandb.run.id}", type="run-files")
                for path, folder in run_artifacts(work_dir, osp.dirname(self._save_dir), self._max_pictures):
                    artifact.add_file(path, name=osp.join(folder, osp.basename(path)), policy="immutable")
                self._wandb.run.log_artifact(artifact)
            except Exception as error:  # noqa: BLE001 - a tracker failure must not fail a finished run
                _warn("W&B", error)
        super().close()


@VISBACKENDS.register_module()
class OarsClearMLVisBackend(ClearMLVisBackend):
    """mmengine's ClearML backend, the task named by the run's timestamp and the run's files uploaded at the end.

    Args:
        save_dir: set by the Runner (``<work_dir>/<timestamp>/vis_data``); names the task.
        init_kwargs: ``clearml.Task.init`` arguments (``project_name``, ``task_name``...).
        max_pictures: pictures uploaded at the end (:func:`run_artifacts`).
    """

    def __init__(self, save_dir: str | None = None, init_kwargs: dict | None = None, max_pictures: int = 32,
                 **kwargs: Any) -> None:
        init_kwargs = dict(init_kwargs or {})
        init_kwargs.setdefault("task_name", run_stamp(save_dir))
        super().__init__(save_dir, init_kwargs=init_kwargs, **kwargs)
        self._max_pictures = max_pictures

    def close(self) -> None:
        """Upload :func:`run_artifacts` (instead of mmengine's suffix scan) and close the task."""
        if not hasattr(self, "_clearml"):
            return
        work_dir = getattr(getattr(self, "cfg", None), "work_dir", None)
        if work_dir and osp.isdir(work_dir):
            run_dir = osp.dirname(self._save_dir) if self._save_dir else None
            try:
                for path, folder in run_artifacts(work_dir, run_dir, self._max_pictures):
                    self._task.upload_artifact(osp.join(folder, osp.basename(path)), path)
            except Exception as error:  # noqa: BLE001 - a tracker failure must not fail a finished run
                _warn("ClearML", error)
        self._task.close()
