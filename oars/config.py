"""YAML configs: load with ``_base_`` inheritance, apply ``-o`` overrides, remember where keys came from.

Configs are plain YAML (no tags, no Python), so a resolved config can be written next to every
checkpoint and loaded again. Inheritance is kept shallow (at most two levels of ``_base_`` below the
top file) because deep chains are where users get lost. Every leaf key remembers the file that set
it last (or ``-o``), so later errors can point at the right file.

This module is the entry point; the work is split by purpose and re-exported here:
``config_yaml`` (reading and writing YAML), ``config_merge`` (merge rules, ``_base_``),
``config_overrides`` (``-o``), ``config_provenance`` (key paths, sources), ``config_mmengine``
(the ``Config`` object) and ``config_error``.
"""

from __future__ import annotations

import os

from mmengine.config import Config

from oars.config_error import ConfigError
from oars.config_merge import BASE_KEY as BASE_KEY
from oars.config_merge import DELETE_KEY as DELETE_KEY
from oars.config_merge import MAX_BASE_DEPTH, _load_tree
from oars.config_mmengine import cfg_provenance, make_config
from oars.config_overrides import OVERRIDE_SOURCE, apply_overrides
from oars.config_provenance import Provenance as Provenance
from oars.config_provenance import join_key, source_of
from oars.config_yaml import YAML_SUFFIXES, config_to_yaml, dump_config


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> Config:
    """Load a YAML config: merge its ``_base_`` files, apply ``-o`` overrides, return a ``Config``.

    Bases merge in the order listed, then the file itself on top: dicts merge deeply, lists and
    scalars replace, and ``_delete_: true`` makes a dict replace the inherited one.
    """
    path = str(path)
    if not path.endswith(YAML_SUFFIXES):
        raise ConfigError(f"{path}: only YAML configs (.yaml or .yml) are supported")
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: config file not found")
    data, provenance = _load_tree(path, ())
    if overrides:
        apply_overrides(data, overrides, provenance)
    return make_config(data, path, provenance)


__all__ = [
    "ConfigError", "MAX_BASE_DEPTH", "OVERRIDE_SOURCE", "apply_overrides", "cfg_provenance",
    "config_to_yaml", "dump_config", "join_key", "load_config", "make_config", "source_of",
]
