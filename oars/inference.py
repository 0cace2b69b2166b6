"""Task-independent inference plumbing: build a model from a config + checkpoint, build the
test pipeline without its annotation-loading steps, and list input images."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import MODELS, DefaultScope

from oars.engine.checkpoint import checkpoint_mismatch, load_checkpoint_file, state_dict_from_checkpoint
from oars.errors import OarsError
from oars.image_files import IMAGE_SUFFIXES, list_images  # noqa: F401  (part of this module's API)


def init_model(cfg: Config, checkpoint: str, device: str = "cpu") -> torch.nn.Module:
    """Build ``cfg.model`` in the config's scope, load ``checkpoint`` strictly, set eval mode.

    The model gets ``dataset_meta`` (classes, palette) from the checkpoint when it has them.
    """
    ckpt = load_checkpoint_file(checkpoint)
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
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        return Compose(steps)


def batched_predict(model: torch.nn.Module, pipeline: Compose, paths: Sequence[str],
                    batch_size: int = 1) -> Iterator[tuple[str, object]]:
    """Yield ``(path, data_sample)`` for every image, running the model in batches."""
    for start in range(0, len(paths), batch_size):
        chunk = paths[start:start + batch_size]
        batch = pseudo_collate([pipeline({"img_path": p}) for p in chunk])
        with torch.no_grad():
            outputs = model.test_step(batch)
        yield from zip(chunk, outputs)
