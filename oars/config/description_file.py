"""A dataset description file (``--data``): its format, root, splits and class names, parsed and checked.

A leaf module (it imports no task, no registry): the contract's :class:`oars.task_roles.Data` names
:class:`DataDescription` in its signature, and the tasks resolve their paths through it, so that every message about
the file (a missing path, a missing split) is worded here once and names the file and the key. Applying a description
to a config is :mod:`oars.config.data_description`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from oars.config.errors import ConfigError

SPLITS = ("train", "val", "test")
_YOLO_KEYS = ("path", "nc")  # an ultralytics data.yaml has one of these and no `format`


class DataDescriptionError(ConfigError):
    """A description file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class DataDescription:
    """A parsed dataset description file.

    Attributes:
        file: the file as the user gave it (messages name it so).
        format: what the data is (``coco``, ``yolo``, ...): the task maps it to a dataset type.
        root: the data's folder (absolute): the file's ``root`` (or ultralytics ``path``) relative to the file.
        splits: ``train``/``val``/``test`` -> the value written (a path, a split name or a mapping).
        names: the class names in index order; None when the file gives none (the annotations then say).
        raw: the whole mapping, for a format's own keys (``img_suffix``, ...).
    """

    file: str
    format: str
    root: str
    splits: dict[str, Any]
    names: list[str] | None
    raw: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The description file's absolute path (an ultralytics data.yaml is handed to its dataset as is)."""
        return os.path.abspath(self.file)

    def split_name(self, split: str) -> str:
        """The split of the file that ``split`` reads: itself, or ``val`` for a ``test`` the file does not have."""
        self.split(split)  # a split the file lacks is an error here
        return split if split in self.splits else "val"

    def split(self, split: str) -> Any:
        """The value of ``split``; ``test`` falls back to ``val`` (most data sets have no labelled test split)."""
        if split in self.splits:
            return self.splits[split]
        if split == "test" and "val" in self.splits:
            return self.splits["val"]
        raise DataDescriptionError(f"{self.file}: {split}: no {split!r} split; the run needs it (give {split}: "
                                   f"... beside {', '.join(self.splits) or 'no split at all'})")

    def resolve(self, split: str, value: Any, key: str | None = None, *, must_exist: bool = True) -> str:
        """``value`` (a path written under ``split`` or ``split.key``) made absolute against :attr:`root`.

        Raises:
            DataDescriptionError: ``value`` is not a non-empty string, or (``must_exist``) nothing is there;
                the message names the file, the key and the path looked for.
        """
        shown = split if key is None else f"{split}.{key}"
        if not isinstance(value, str) or not value:
            raise DataDescriptionError(f"{self.file}: {shown}: expected a path (relative to root {self.root}), got "
                                       f"{value!r}")
        path = os.path.normpath(os.path.join(self.root, os.path.expanduser(value)))
        if must_exist and not os.path.exists(path):
            raise DataDescriptionError(f"{self.file}: {shown}: {value!r} does not exist (looked for {path}; paths "
                                       "are relative to the description's root, which is relative to the file)")
        return path


def _names(value: Any, file: str, root: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):  # ultralytics: {0: person, 1: bicycle}
        try:
            ids = sorted(int(k) for k in value)
        except (TypeError, ValueError):
            raise DataDescriptionError(f"{file}: names: a mapping must have integer ids as keys, got "
                                       f"{list(value)!r}") from None
        if ids != list(range(len(ids))):
            raise DataDescriptionError(f"{file}: names: ids must be 0..{len(ids) - 1} without gaps, got {ids}")
        return [str(value[i] if i in value else value[str(i)]) for i in ids]
    if isinstance(value, str):  # a text file, one name a line
        path = os.path.join(root, value)
        if not os.path.isfile(path):
            raise DataDescriptionError(f"{file}: names: {value!r} is not a file of class names (looked for {path}); "
                                       "give a list, a mapping {id: name} or a text file with one name a line")
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    if isinstance(value, Sequence) and value and all(isinstance(n, (str, int)) for n in value):
        return [str(n) for n in value]
    raise DataDescriptionError(f"{file}: names: expected a list of class names, a mapping {{id: name}} or a text "
                               f"file, got {value!r}")


def read_description(file: str) -> DataDescription:
    """Parse a dataset description file (see the module docstring).

    Raises:
        DataDescriptionError: a missing or unreadable file, an unknown key, a missing ``format`` (for a file that is
            not an ultralytics data.yaml), a ``root`` that does not exist, bad ``names``.
    """
    if not os.path.isfile(file):
        raise DataDescriptionError(f"--data {file}: dataset description file not found")
    try:
        with open(file, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise DataDescriptionError(f"{file}: not a YAML dataset description: {err}") from None
    if not isinstance(raw, Mapping):
        raise DataDescriptionError(f"{file}: expected a mapping (format, root, train, val, test, names), got "
                                   f"{type(raw).__name__}")
    raw = dict(raw)
    here = os.path.dirname(os.path.abspath(file))
    ultralytics = "format" not in raw and any(k in raw for k in _YOLO_KEYS) and "names" in raw
    if ultralytics:
        fmt, root_key = "yolo", "path"
    else:
        fmt, root_key = raw.get("format"), "root"
        if not isinstance(fmt, str) or not fmt:
            raise DataDescriptionError(f"{file}: format: missing (expected the data's format, e.g. format: coco); "
                                       "an ultralytics data.yaml (path, train, val, names) needs none")
    root_value = raw.get(root_key) or "."
    if not isinstance(root_value, str):
        raise DataDescriptionError(f"{file}: {root_key}: expected a folder (relative to this file), got {root_value!r}")
    root = os.path.normpath(os.path.join(here, os.path.expanduser(root_value)))
    if not os.path.isdir(root):
        raise DataDescriptionError(f"{file}: {root_key}: {root_value!r} is not a folder (looked for {root})")
    splits = {s: raw[s] for s in SPLITS if raw.get(s) is not None}
    if not splits:
        raise DataDescriptionError(f"{file}: no split: give train, val (and test) as the format reads them")
    return DataDescription(file=file, format=fmt, root=root, splits=splits,
                           names=_names(raw.get("names"), file, root), raw=raw)
