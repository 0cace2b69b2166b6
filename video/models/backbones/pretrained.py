"""``pretrained: PATH`` (MMAction2's key) as a shorthand for oars' ``init: {checkpoint: PATH}``."""

from __future__ import annotations

from typing import Any


def pretrained_init(owner: str, pretrained: str | None, init: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``init`` dict a backbone hands to :class:`oars.models.backbones.base.Backbone`: ``init`` as given, or
    ``{checkpoint: pretrained}``. Either way the file is read in ``init_weights`` (when training starts), never in
    ``__init__``, and never downloaded: it is a local path.

    Raises:
        ValueError: both are given, or ``pretrained`` is not a non-empty string.
    """
    if pretrained is None:
        return init
    if init is not None:
        raise ValueError(f"{owner}: give pretrained: PATH or init: {{checkpoint: PATH}}, not both "
                         f"(got pretrained={pretrained!r}, init={init!r})")
    if not isinstance(pretrained, str) or not pretrained:
        raise ValueError(f"{owner}: pretrained must be a local checkpoint path (str), got {pretrained!r}")
    return {"checkpoint": pretrained}
