"""Task-independent inference plumbing: the test pipeline without its annotation-loading steps, input listing and
running a model over images in batches (what the tasks' ``infer`` use).

A folder with one unreadable file still gets every other image predicted: :func:`batched_predict` records the
file in a :class:`oars_deploy.failures.Failures` and goes on; the caller raises its summary at the end.
Building a model from a config and a checkpoint is a pipeline step: :func:`oars.pipelines.model.init_model`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from mmengine.dataset import Compose, pseudo_collate

from oars.data.test_pipeline import build_test_pipeline  # noqa: F401  (part of this module's API)
from oars_deploy.errors import UserError
from oars_deploy.failures import Failures
from oars_deploy.image_files import IMAGE_SUFFIXES, list_images  # noqa: F401  (part of this module's API)
from oars_deploy.output_paths import check_output_folder  # noqa: F401  (the one output rule, runtime's)


def batched_predict(model: torch.nn.Module, pipeline: Compose, paths: Sequence[str], batch_size: int = 1,
                    failures: Failures | None = None,
                    predict: Callable[[torch.nn.Module, dict], list] | None = None) -> Iterator[tuple[str, object]]:
    """Yield ``(path, data_sample)`` for every image, running the model in batches.

    ``failures``: where an image the pipeline cannot read goes (a :class:`UserError` from its loading steps,
    e.g. a corrupt or unsupported file); that image is skipped and the others are predicted. Without it the
    error propagates. ``predict(model, batch)``: what runs a collated batch (default ``model.test_step``).
    """
    predict = predict or (lambda m, batch: m.test_step(batch))
    for start in range(0, len(paths), batch_size):
        chunk, items = [], []
        for path in paths[start:start + batch_size]:
            try:
                items.append(pipeline({"img_path": path}))
            except UserError as err:
                if failures is None:
                    raise
                failures.add(path, str(err))
                continue
            chunk.append(path)
        if not items:
            continue
        with torch.no_grad():
            outputs = predict(model, pseudo_collate(items))
        yield from zip(chunk, outputs)


def __getattr__(name: str) -> Any:
    """``init_model`` moved up to :mod:`oars.pipelines.model`; the old name keeps working for code outside oars."""
    if name == "init_model":
        warnings.warn("oars.inference.init_model moved to oars.pipelines.model.init_model", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module("oars.pipelines.model").init_model
    raise AttributeError(f"module 'oars.inference' has no attribute {name!r}")
