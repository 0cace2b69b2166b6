"""Hub names -> entries: ``torchvision://<builder>[.<weights member>]`` read from torchvision's weight enums, and
``oars://<name>`` from the user's local registry (:mod:`oars.hub.local`).

A torchvision entry's URL, sha256 prefix (the ``-<hex>`` of its file name, as torch.hub checks it) and parameter
count come from ``torchvision.models.get_model_weights(builder)``; the member defaults to the enum's ``DEFAULT``.
Which converter the state dict needs (if any) comes from ``oars/hub/torchvision.yaml``.
"""

from __future__ import annotations

import functools
import os.path as osp
from dataclasses import dataclass
from typing import Any

import yaml

from .download import HubError, cache_dir, hash_prefix_of
from .local import LOCAL_SCHEME, close_names, read_registry, registered_record

TORCHVISION_SCHEME = "torchvision://"
SCHEMES = (TORCHVISION_SCHEME, LOCAL_SCHEME)
TABLE_FILE = osp.join(osp.dirname(__file__), "torchvision.yaml")


@dataclass(frozen=True)
class HubEntry:
    """One named checkpoint.

    Attributes:
        name: the canonical name (``torchvision://resnet50.IMAGENET1K_V2``, ``oars://my_model``).
        url: where it is published (None for a local registration).
        path: where the file is, or goes (the hub cache for torchvision's).
        sha256: the hash prefix a download is checked against (torchvision) or the full hash recorded (local).
        converter: the registered converter its state dict goes through before loading (None: loaded as is).
        num_params: parameter count (torchvision's ``meta['num_params']``, or counted when registering).
        use: what it is for, in words.
        task: the task of a local registration (its config's ``default_scope``); torchvision entries: None
            (see :func:`entry_task`).
    """

    name: str
    url: str | None
    path: str
    sha256: str | None
    converter: str | None
    num_params: int | None
    use: str = ""
    task: str | None = None

    @property
    def cached(self) -> bool:
        """Whether the file is already on this machine."""
        return osp.isfile(self.path)


def is_hub_name(value: object) -> bool:
    """Whether ``value`` is a hub name (``torchvision://...`` or ``oars://...``) rather than a file path."""
    return isinstance(value, str) and value.startswith(SCHEMES)


@functools.lru_cache(maxsize=1)
def curated() -> dict[str, dict[str, Any]]:
    """``oars/hub/torchvision.yaml``: builder -> ``{converter, use}``."""
    with open(TABLE_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _builders() -> list[str]:
    import torchvision.models

    return list(torchvision.models.list_models())


def torchvision_entry(builder: str, member: str | None = None) -> HubEntry:
    """The entry of torchvision's ``builder`` weights, member ``member`` (default: the enum's ``DEFAULT``).

    Raises:
        HubError: an unknown builder (close names listed), a builder without published weights, or an unknown
            member (the members listed).
    """
    import torchvision.models

    known = _builders()
    if builder not in known:
        raise HubError(f"{TORCHVISION_SCHEME}{builder}: torchvision has no model builder {builder!r}"
                       f"{close_names(builder, sorted(set(known) | set(curated())))}; see python tools/hub.py list")
    weights = torchvision.models.get_model_weights(builder)
    members = [m.name for m in weights]
    if not members:
        raise HubError(f"{TORCHVISION_SCHEME}{builder}: torchvision publishes no weights for it")
    if member is None or member == "DEFAULT":
        chosen = weights.DEFAULT
    elif member in members:
        chosen = weights[member]
    else:
        raise HubError(f"{TORCHVISION_SCHEME}{builder}.{member}: {weights.__name__} has no member {member!r}; "
                       f"accepted: {', '.join(members + ['DEFAULT'])}")
    filename = chosen.url.rsplit("/", 1)[-1]
    table = curated().get(builder) or {}
    return HubEntry(name=f"{TORCHVISION_SCHEME}{builder}.{chosen.name}", url=chosen.url,
                    path=osp.join(cache_dir(), filename), sha256=hash_prefix_of(filename),
                    converter=table.get("converter"), num_params=chosen.meta.get("num_params"),
                    use=str(table.get("use") or ""))


def local_entry(name: str) -> HubEntry:
    """The entry of a checkpoint registered as ``name`` (no file read here; :func:`oars.hub.local.local_file`
    checks it when loading).

    Raises:
        HubError: the name is not registered (close names listed).
    """
    rec = registered_record(name)
    use = f"trained with {rec['config']}" if rec.get("config") else "registered checkpoint"
    return HubEntry(name=f"{LOCAL_SCHEME}{name}", url=None, path=rec["path"], sha256=rec.get("sha256"),
                    converter=None, num_params=rec.get("num_params"), use=use, task=rec.get("task"))


def resolve(name: str) -> HubEntry:
    """The entry a hub name stands for: ``torchvision://<builder>[.<member>]`` or ``oars://<name>``.

    A bare name (no scheme) is tried as a torchvision builder, then as a local registration (``tools/hub.py``).

    Raises:
        HubError: an empty, unknown or malformed name; the message lists close names.
    """
    if name.startswith(LOCAL_SCHEME):
        return local_entry(name[len(LOCAL_SCHEME):])
    if name.startswith(TORCHVISION_SCHEME):
        rest = name[len(TORCHVISION_SCHEME):]
    elif "://" in name:
        raise HubError(f"{name}: unknown hub scheme; accepted: {', '.join(SCHEMES)}")
    else:
        rest = name
        if rest not in _builders() and rest.partition(".")[0] not in _builders() and rest in read_registry():
            return local_entry(rest)
    builder, _, member = rest.partition(".")
    if not builder:
        raise HubError(f"{name!r}: expected {TORCHVISION_SCHEME}<builder>[.<weights member>], e.g. "
                       f"{TORCHVISION_SCHEME}resnet50 or {TORCHVISION_SCHEME}resnet50.IMAGENET1K_V1")
    return torchvision_entry(builder, member or None)


def list_entries(include_all: bool = False) -> list[HubEntry]:
    """The curated torchvision entries (each builder's default; every member and every torchvision builder with
    ``include_all``), then the local registrations."""
    import torchvision.models

    builders = sorted(set(_builders()) | set(curated())) if include_all else list(curated())
    out: list[HubEntry] = []
    for builder in builders:
        try:
            weights = torchvision.models.get_model_weights(builder)
        except (ValueError, KeyError):
            continue
        members = [m.name for m in weights] if include_all else [weights.DEFAULT.name]
        out += [torchvision_entry(builder, m) for m in members]
    out += [local_entry(n) for n in sorted(read_registry())]
    return out


def entry_task(entry: HubEntry) -> str:
    """Which task uses the entry: a local one's config scope; a torchvision one's converter's package; ``any`` for
    weights loaded as they are (backbones, feature extractors)."""
    if entry.task:
        return entry.task
    if entry.converter is None:
        return "any"
    from .converters import ConverterError, get_converter

    try:
        return get_converter(entry.converter).package
    except ConverterError:
        return f"? ({entry.converter} not registered)"
