"""Wrap plain config data in mmengine's ``Config`` and keep its provenance beside the data.

Provenance lives in ``Config.__dict__``, outside ``_cfg_dict``, so dumps and mmengine never see it;
loading and ``-o`` overrides both build their ``Config`` objects here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mmengine.config import Config

from oars.config.errors import ConfigError
from oars.config.provenance import Provenance, source_of
from oars.config.yaml_io import _to_plain

_PROVENANCE_ATTR = "_oars_provenance"  # lives in Config.__dict__, outside _cfg_dict, so dumps never see it
_RESERVED_TOP_KEYS = ("filename", "text", "pretty_text", "env_variables")  # mmengine's Config reserves these


class OarsConfig(Config):
    """mmengine's ``Config``, except that Ctrl-C while it formats itself stays a ``KeyboardInterrupt``.

    ``pretty_text`` (written into every checkpoint's meta by ``Runner.save_checkpoint``) runs yapf under a
    bare ``except:`` that turns the interrupt into "SyntaxError: Failed to format the config file", so
    Ctrl-C during a checkpoint save looked like a broken config.
    """

    @property
    def pretty_text(self) -> str:
        try:
            return super().pretty_text
        except SyntaxError as err:
            if isinstance(err.__context__, KeyboardInterrupt):
                raise err.__context__ from None
            raise


def cfg_provenance(cfg: Config) -> Provenance:
    """Leaf key path -> file that set it last (``-o`` for command-line overrides). Live mapping."""
    prov = vars(cfg).get(_PROVENANCE_ATTR) if isinstance(cfg, Config) else None
    if prov is None:
        prov = {}
        if isinstance(cfg, Config):
            object.__setattr__(cfg, _PROVENANCE_ATTR, prov)
    return prov


def make_config(cfg_dict: Mapping, filename: str | os.PathLike | None = None,
                provenance: Provenance | None = None) -> Config:
    """An mmengine ``Config`` holding plain data, with ``provenance`` attached (not part of dumps)."""
    data = _to_plain(cfg_dict)
    for key in _RESERVED_TOP_KEYS:
        if key in data:
            where = source_of(provenance or {}, key) or filename or "<config>"
            raise ConfigError(f"{where}: top-level key {key!r} is reserved by mmengine's Config; rename it")
    cfg = OarsConfig(data, filename=None if filename is None else str(filename))
    object.__setattr__(cfg, _PROVENANCE_ATTR, dict(provenance or {}))
    return cfg
