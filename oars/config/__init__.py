"""YAML configs: load with ``_base_`` inheritance, apply ``-o`` overrides, remember where keys came from.

Configs are plain YAML (no tags, no Python), so a resolved config can be written next to every
checkpoint and loaded again. ``_base_`` chains may be of any depth (cycles are refused, naming the chain). Every
leaf key remembers the file that set it last (or ``-o``), so later errors can point at the right file.

This package is the entry point; the work is split by purpose and re-exported here:
``load`` (``load_config``), ``yaml_io`` (reading and writing YAML), ``merge`` (merge rules,
``_base_``), ``overrides`` (``-o``), ``provenance`` (key paths, sources), ``mmengine_config``
(the ``Config`` object), ``resolved`` (what oars set after loading, and why: ``_resolved_by_oars``) and
``errors``. ``check`` (``python -m oars.config.check``) is not
imported here: it needs the registries.
"""

from __future__ import annotations

from oars.config.errors import ConfigError
from oars.config.load import load_config
from oars.config.merge import BASE_KEY as BASE_KEY
from oars.config.merge import DELETE_KEY as DELETE_KEY
from oars.config.mmengine_config import cfg_provenance, make_config
from oars.config.overrides import OVERRIDE_SOURCE, apply_overrides
from oars.config.provenance import Provenance as Provenance
from oars.config.provenance import join_key, source_of
from oars.config.yaml_io import config_to_yaml, dump_config

__all__ = [
    "ConfigError", "OVERRIDE_SOURCE", "apply_overrides", "cfg_provenance",
    "config_to_yaml", "dump_config", "join_key", "load_config", "make_config", "source_of",
]
