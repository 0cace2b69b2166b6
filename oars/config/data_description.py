"""One ``data=`` switch: a dataset description file sets every loader's dataset (type, root, split, classes) and the
model's ``num_classes`` in one place (``tools/train.py --data``, ``tools/eval.py --data``, ``oars.Model.train(data=)``).

Without it, pointing a config at your own data took three ``data_root`` overrides (nine for YOLO txt data: type,
``data_yaml`` and split per loader). The file is YAML::

    format: coco                 # the task says what it reads (a detector: coco, voc, yolo; ...)
    root: ../my_data             # relative to this file (default: its folder)
    train: annotations/train.json        # what a split is depends on the format: a file, a folder, a mapping
    val: {ann: annotations/val.json, img: images/val}
    test: ...                    # optional: the val split is used when absent
    names: [cat, dog]            # or {0: cat, 1: dog}, or a text file with one name a line

An ultralytics ``data.yaml`` (``path``, ``train``, ``val``, ``test``, ``names``, ``nc``, no ``format``) is read as
is, as format ``yolo``. The core names no task: which dataset type and keys a format means comes from the config's
task, through the contract (:meth:`oars.task_roles.Data.dataset_from_description`). Every key set is recorded with
its source (``--data FILE``): in the provenance (errors name the description file) and in the run's
``_resolved_by_oars`` section; ``data_description: {file, format}`` stays in the resolved config.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmengine.config import Config

from oars.config.description_file import SPLITS, read_description
from oars.config.description_file import DataDescription as DataDescription  # re-exported: public API
from oars.config.description_file import DataDescriptionError as DataDescriptionError
from oars.config.errors import ConfigError
from oars.config.mmengine_config import cfg_provenance
from oars.config.provenance import _forget, _record, join_key
from oars.config.resolved import record

DESCRIPTION_KEY = "data_description"  # top-level key of the resolved config: {file, format}


def _datasets(loader: Any, path: tuple) -> list[tuple[tuple, dict]]:
    """The dataset dict a loader reads, with its key path: its ``dataset``, or the ``dataset`` inside a wrapper
    (``RepeatDataset``, ``ClassBalancedDataset``). A ``ConcatDataset`` (several sources) becomes the one described
    data set, keeping the first source's other keys (its pipeline, ...)."""
    if not isinstance(loader, Mapping) or not isinstance(loader.get("dataset"), Mapping):
        return []
    node, path = loader["dataset"], (*path, "dataset")
    while isinstance(node.get("dataset"), Mapping):
        node, path = node["dataset"], (*path, "dataset")
    sources = node.get("datasets")
    if isinstance(sources, (list, tuple)) and sources and isinstance(sources[0], Mapping):
        return [(path, {k: v for k, v in sources[0].items() if k != "type"})]
    return [(path, node)]


def _key_text(path: Iterable) -> str:
    text = ""
    for part in path:
        text = join_key(text, part)
    return text


def _accepted(dataset_type: str, scope: str | None) -> list[str] | None:
    """The arguments of the registered dataset ``dataset_type`` (None: cannot tell, keep every key)."""
    from oars.config.arguments import accepted_arguments
    from oars.config.registry_lookup import _lookup, _Registries

    try:
        registries = _Registries()
        registry = registries.get("DATASETS", scope)
        registries.import_error(registry)
        obj = _lookup(registry, dataset_type)
    except ConfigError:
        return None
    return accepted_arguments(obj) if obj is not None else None


def _new_dataset(old: Mapping, new: Mapping, names: list[str] | None, scope: str | None) -> dict:
    """The task's ``new`` keys over ``old``'s keys that the new type still accepts (the pipeline, test_mode, ...)."""
    accepted = _accepted(new["type"], scope) if new.get("type") != old.get("type") else None
    kept = {k: v for k, v in old.items() if accepted is None or k in accepted or k == "_scope_"}
    palette = kept.get("palette")
    if names is not None and isinstance(palette, Sequence) and len(palette) != len(names):
        kept.pop("palette")  # colours of the config's classes: the dataset picks colours for the new ones
    return {**kept, **new}


def _num_classes_paths(value: Any, path: tuple) -> list[tuple]:
    """Every ``num_classes`` key under ``model`` (heads and detectors both may have one)."""
    found = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "num_classes":
                found.append((*path, key))
            else:
                found += _num_classes_paths(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found += _num_classes_paths(item, (*path, i))
    return found


def _set(data: dict, path: tuple, value: Any) -> None:
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def apply_data_description(cfg: Config, data: str, splits: Sequence[str] | None = None) -> None:
    """Point every data loader of ``cfg`` at the data set ``data`` describes, in place.

    Args:
        cfg: a loaded config (its ``default_scope`` names the task that maps the format to its dataset types).
        data: the description file (see the module docstring) or an ultralytics data.yaml.
        splits: the splits the run reads (``train`` for ``train_dataloader``, ...); None: every loader the config
            has. A split the description lacks is an error for these (``test`` falls back to ``val``).

    Raises:
        DataDescriptionError: the file, a key or a path cannot be used (the message names the file and the key), or
            the config's task does not read this format.
    """
    from oars.tasks import get_task

    description = read_description(data)
    scope = cfg.get("default_scope")
    role = get_task(scope, where=f"--data {data}: the config's default_scope").data(cfg)
    source = f"--data {data}"
    plain = cfg.to_dict()
    provenance = cfg_provenance(cfg)
    changed: list[tuple[tuple, Any]] = []  # what is replaced: whole datasets, num_classes, the record
    notes: list[tuple[tuple, Any]] = []  # what the description set, key by key (the run's _resolved_by_oars)
    loaders = [k for k in plain if isinstance(k, str) and k.endswith("_dataloader") and k[:-11] in SPLITS]
    for key in loaders:
        split = key[: -len("_dataloader")]
        if splits is not None and split not in splits:
            continue
        for path, old in _datasets(plain[key], (key,)):
            new = role.dataset_from_description(description, split)
            if new is None:
                formats = ", ".join(role.description_formats) or "none"
                raise DataDescriptionError(f"{data}: format: {description.format!r} is not a format the config's task "
                                           f"({scope}) reads; known formats: {formats}")
            if not isinstance(new.get("type"), str):
                raise DataDescriptionError(f"{data}: the task ({scope}) gave no dataset type for format "
                                           f"{description.format!r}")
            changed.append((path, _new_dataset(old, new, description.names, scope)))
            notes += [((*path, k), v) for k, v in new.items()]
    extra: list[tuple[tuple, Any]] = []
    if description.names is not None and isinstance(plain.get("model"), Mapping):
        extra += [(p, len(description.names)) for p in _num_classes_paths(plain["model"], ("model",))]
    extra.append(((DESCRIPTION_KEY,), {"file": os.path.abspath(data), "format": description.format}))
    changed += extra
    notes += extra
    for path, value in changed:
        _set(plain, path, value)
    from oars.config.mmengine_config import make_config

    for path, value in changed:
        text = _key_text(path)
        _forget(provenance, text)
        _record(provenance, text, value, lambda _k: source)
    rebuilt = make_config(plain, cfg.filename, provenance)  # (mmengine's Config: replace its data as -o does)
    object.__setattr__(cfg, "_cfg_dict", vars(rebuilt)["_cfg_dict"])
    for path, value in notes:
        record(cfg, _key_text(path), value, source)
