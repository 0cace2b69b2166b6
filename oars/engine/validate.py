"""Validate a run's config once, before the engine adds anything: what the user wrote is what is checked.

Two checks make up validation: ``oars.config.check.check_config`` (every type, argument, section shape and
value) and :func:`check_dataset_agreement` (the datasets against the model). A validated ``Config`` is marked,
so building its Runner later (``runner.build_runner``) does not check it a second time; a config that never
went through :func:`validate_config` (``prepare_config`` + ``build_runner`` in tests) is checked there.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from mmengine.config import Config
from mmengine.registry import DefaultScope

from oars.errors import OarsError

_VALIDATED_ATTR = "_oars_validated"  # in Config.__dict__ (kept by deepcopy), outside the config data


ALL_SPLITS = ("train_dataloader", "val_dataloader", "test_dataloader")


def validate_config(cfg: Config, splits: Sequence[str] = ALL_SPLITS) -> None:
    """Check ``cfg`` (raises ``ConfigError``/``OarsError`` with the file and key) and mark it as checked.

    ``splits``: the dataloaders the run uses, whose datasets are checked against the model (an evaluation uses
    only the test split: its machine need not hold the training data)."""
    from oars.config import check

    check.check_config(cfg)
    check_dataset_agreement(cfg, splits)
    object.__setattr__(cfg, _VALIDATED_ATTR, True)


def is_validated(cfg: Config) -> bool:
    """Whether :func:`validate_config` passed on ``cfg`` (or the config it was copied from)."""
    return bool(vars(cfg).get(_VALIDATED_ATTR))


def check_dataset_agreement(cfg: Config, splits: Sequence[str] = ALL_SPLITS) -> None:
    """Fail at build time when a dataset disagrees with the model: class count versus
    ``model.num_classes``, then what the config's task checks (``Data.check_dataset`` of its kind; segmentation: the
    dataset's ``ignore_index`` versus the heads', the label padding value and the evaluators')."""
    num_classes = cfg.get("model", {}).get("num_classes")
    if num_classes is None:
        return
    from mmengine.registry import DATASETS

    from oars.tasks import find_task

    task = find_task(cfg.get("default_scope"))  # a scope without a registered task has no checks of its own

    for split in splits:
        loader = cfg.get(split)
        if not loader or not isinstance(loader.get("dataset"), dict):
            continue
        ds_cfg = copy.deepcopy(loader["dataset"])
        inner = ds_cfg  # wrappers (MultiImageMixDataset) take no lazy_init: the dataset they wrap does
        while isinstance(inner.get("dataset"), dict):
            inner = inner["dataset"]
        inner["lazy_init"] = True
        with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
            dataset = DATASETS.build(ds_cfg)
        classes = dataset.metainfo.get("classes")
        if classes is not None and len(classes) != num_classes:
            raise OarsError(
                f"{cfg.filename}: {split}.dataset ({ds_cfg['type']}) has {len(classes)} classes "
                f"{list(classes)} but model.num_classes is {num_classes}; make them agree "
                f"(e.g. -o model.num_classes={len(classes)})")
        if task is not None:
            task.data(cfg).check_dataset(cfg, split, dataset)
