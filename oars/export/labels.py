"""deploy.yaml's class names and palette: from the checkpoint, else the config's dataset, else the dataset class.

Why its own module: the exporter and a task's export spec (a generator's class names) both ask it, and a short
label list must fail before the slow part of an export.
"""

from __future__ import annotations

import os.path as osp

import torch
from mmengine.config import Config

from oars.export.errors import ExportError


def dataset_labels(cfg: Config, model: torch.nn.Module) -> tuple[list[str], list[list[int]]]:
    """Class names and RGB palette: checkpoint meta, else the config's dataset, else the dataset class.

    Fewer names than the model's ``num_classes`` is an :class:`ExportError` naming where the names came from: a
    deploy.yaml with a short label list would make the predictors fail (or mislabel) on the unnamed classes.
    """
    from oars_deploy.draw.palette import get_palette

    meta = dict(getattr(model, "dataset_meta", None) or {})
    source = "the checkpoint's dataset_meta"
    if not meta.get("classes"):
        meta, source = (_config_dataset_meta(cfg) or meta), "the config's test dataset"
    num = int(getattr(model, "num_classes", 0) or 0)
    classes = [str(c) for c in (meta.get("classes") or [str(i) for i in range(num)])]
    if len(classes) < num:
        raise ExportError(f"{cfg.filename}: {source} names {len(classes)} classes ({classes}) but the model has "
                          f"num_classes={num}; deploy.yaml needs a label for every class the model outputs (fix "
                          "model.num_classes or the dataset's classes)")
    if not classes:  # a model without classes (an image-to-image generator): its spec gives the labels
        return [], []
    try:
        palette = get_palette(len(classes), meta.get("palette"))
    except ValueError:
        palette = get_palette(len(classes))
    return classes, [[int(v) for v in row] for row in palette]


def _config_dataset_meta(cfg: Config) -> dict:
    loader = cfg.get("test_dataloader") or cfg.get("val_dataloader") or {}
    ds = dict(loader.get("dataset") or {})
    if isinstance(ds.get("classes"), str):  # a text file of names, one per line (the video datasets take these)
        return {"classes": _class_file(ds["classes"], ds.get("data_root") or "", cfg), "palette": ds.get("palette")}
    if ds.get("classes"):
        return {"classes": ds["classes"], "palette": ds.get("palette")}
    from mmengine.registry import DATASETS, DefaultScope

    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        with DATASETS.switch_scope_and_registry(cfg.get("default_scope")) as registry:
            klass = registry.get(ds.get("type")) if ds.get("type") else None
    info = dict(getattr(klass, "METAINFO", None) or {})
    return {"classes": info.get("classes"), "palette": info.get("palette")} if info.get("classes") else {}


def _class_file(path: str, data_root: str, cfg: Config) -> list[str]:
    """The names of a classes file (as given, else under ``data_root``), one per non-empty line."""
    candidates = [path] if osp.isabs(path) or not data_root else [path, osp.join(data_root, path)]
    found = next((p for p in candidates if osp.isfile(p)), None)
    if found is None:
        raise ExportError(f"{cfg.filename}: the test dataset's classes file is not found: {' or '.join(candidates)}")
    with open(found) as f:
        return [line.strip() for line in f if line.strip()]
