"""``load_config``: the one call that turns a YAML file (plus ``-o`` overrides) into a ``Config``.

Kept apart from ``oars.config.__init__`` so sibling modules (``check``) can import it directly,
without going through the package that re-exports them.
"""

from __future__ import annotations

import os

from mmengine.config import Config

from oars.config.errors import ConfigError
from oars.config.merge import _load_tree
from oars.config.mmengine_config import make_config
from oars.config.overrides import apply_overrides
from oars.config.provenance import _forget
from oars.config.resolved import RESOLVED_KEY, set_previous_resolution
from oars.config.yaml_io import YAML_SUFFIXES


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> Config:
    """Load a YAML config: merge its ``_base_`` files, apply ``-o`` overrides, return a ``Config``.

    Bases merge in the order listed, then the file itself on top: dicts merge deeply, lists and
    scalars replace, and ``_delete_: true`` makes a dict replace the inherited one. A run's ``config.yaml``
    loads like any config: its ``_resolved_by_oars`` section (what oars set, and why) is a record, not
    settings, so it is taken out and kept beside the ``Config`` (``oars.config.resolved``).
    """
    path = str(path)
    if not path.endswith(YAML_SUFFIXES):
        raise ConfigError(f"{path}: only YAML configs (.yaml or .yml) are supported")
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: config file not found")
    data, provenance = _load_tree(path, ())
    if overrides:
        apply_overrides(data, overrides, provenance)
    previous = data.pop(RESOLVED_KEY, None)
    _forget(provenance, RESOLVED_KEY)
    cfg = make_config(data, path, provenance)
    set_previous_resolution(cfg, previous)
    return cfg
