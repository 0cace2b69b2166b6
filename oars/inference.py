"""Task-independent inference plumbing: build a model from a config + checkpoint, build the
test pipeline without its annotation-loading steps, list input images and run the model over them.

A folder with one unreadable file still gets every other image predicted: :func:`batched_predict` records the
file in a :class:`oars_deploy.failures.Failures` and goes on; the caller raises its summary at the end.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence

import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import MODELS, DefaultScope

from oars.engine.checkpoint import checkpoint_mismatch, load_checkpoint_file, state_dict_from_checkpoint
from oars.errors import OarsError
from oars.tasks import activate
from oars_deploy.errors import UserError
from oars_deploy.failures import Failures
from oars_deploy.image_files import IMAGE_SUFFIXES, list_images  # noqa: F401  (part of this module's API)
from oars_deploy.output_paths import check_output_folder  # noqa: F401  (the one output rule, runtime's)


def init_model(cfg: Config, checkpoint: str, device: str = "cpu") -> torch.nn.Module:
    """Build ``cfg.model`` in the config's scope, load ``checkpoint`` strictly, set eval mode.

    The model gets ``dataset_meta`` (classes, palette) from the checkpoint when it has them.
    """
    ckpt = load_checkpoint_file(checkpoint)
    activate(cfg.get("default_scope"))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        model = MODELS.build(copy.deepcopy(cfg.model))
    state = state_dict_from_checkpoint(ckpt)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise checkpoint_mismatch(checkpoint, cfg.filename, err) from None
    meta = ckpt.get("meta", {}) if isinstance(ckpt, dict) else {}
    model.dataset_meta = meta.get("dataset_meta") or {}
    return model.to(device).eval()


def build_test_pipeline(cfg: Config, drop: Sequence[str] = ()) -> Compose:
    """The test pipeline of ``cfg`` minus the transform types in ``drop`` (annotation loaders)."""
    loader = cfg.get("test_dataloader") or cfg.get("val_dataloader")
    if not loader:
        raise OarsError(f"{cfg.filename}: no test_dataloader/val_dataloader to take the test pipeline from")
    steps = [copy.deepcopy(t) for t in loader["dataset"]["pipeline"] if t.get("type") not in set(drop)]
    activate(cfg.get("default_scope"))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        return Compose(steps)


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
