"""What every pruning module shares: the optional ``torch_pruning`` package and the rule of which layers a
``compress.scope`` prefix covers. Its own module so that :mod:`oars.compress.prune` (the pruner),
:mod:`oars.compress.prune_kept` and :mod:`oars.compress.prune_layers` (its helpers) import it without importing
each other in a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oars.extras import require_extra

PRUNE_FEATURE = "structured pruning (tools/compress.py --method prune)"


def torch_pruning() -> Any:
    """The ``torch_pruning`` module (the ``compress`` extra), or the one-line error saying how to install it."""
    return require_extra("torch_pruning", PRUNE_FEATURE)


def in_scope(path: str, prefixes: Sequence[str]) -> bool:
    """Whether the module at ``path`` (a dotted name) is one of ``prefixes`` or inside one."""
    return any(path == p or path.startswith(p + ".") for p in prefixes)
