"""The options of ``tools/compress.py``: the config's ``compress:`` section, then the command line (which wins).

One dict for every method: pruning reads its keys here (:func:`prune_settings`); ``qat`` and ``distill`` receive the
same merged dict (``options``) and read their own keys. Unknown keys of the section are errors naming the key and
the accepted ones, so a typo never silently falls back to a default.
"""

from __future__ import annotations

from typing import Any

from mmengine.config import Config

from oars.errors import OarsError

from .prune import CRITERIA, PruneSettings

# Keys the pruning method and the tool itself read (the other methods read their own sections).
PRUNE_KEYS = ("target_flops", "target_params", "criterion", "steps", "scope", "ignore", "max_layer_ratio",
              "round_to", "global_pruning")
TOOL_KEYS = ("method", "epochs", "variant", "export", "latency")
OTHER_METHOD_SECTIONS = ("ptq", "qat", "distill")  # compress.ptq / .qat / .distill: those methods' own settings


def merged_options(cfg: Config, cli: dict[str, Any]) -> dict[str, Any]:
    """``cfg.compress`` updated with the command-line values that were given (not None); the method's name is
    checked where the methods are registered (:func:`oars.pipelines.compress.compress`).

    Raises:
        OarsError: ``compress`` is not a mapping.
    """
    section = cfg.get("compress") or {}
    if not isinstance(section, dict):
        raise OarsError(f"{cfg.filename}: compress: expected a mapping of options, got {section!r}")
    out = dict(section)
    out.update({k: v for k, v in cli.items() if v is not None})
    return out


def prune_settings(options: dict[str, Any], filename: str | None = None, *, method: str = "prune",
                   extra_keys: tuple[str, ...] = (), need_target: bool = True) -> PruneSettings:
    """The pruning settings in ``options``, checked.

    ``method``, ``extra_keys`` and ``need_target``: how automatic pruning and sensitivity analysis
    (:mod:`oars.compress.auto_prune_options`) reuse the checks: their own keys are accepted too, and they set their
    budget themselves (no ``target_flops``/``target_params`` needed).

    Raises:
        OarsError: a key no method knows (with the accepted keys), or a value of the wrong kind (named).
    """
    where = f"{filename}: " if filename else ""
    unknown = sorted(set(options) - set(PRUNE_KEYS) - set(TOOL_KEYS) - set(OTHER_METHOD_SECTIONS) - set(extra_keys))
    if unknown:
        raise OarsError(f"{where}compress: unknown option(s) {unknown} for --method {method}; accepted: "
                        f"{sorted(PRUNE_KEYS + TOOL_KEYS + tuple(extra_keys))}")
    settings = PruneSettings()
    for key in PRUNE_KEYS:
        if key in options and options[key] is not None:
            setattr(settings, key, options[key])
    if settings.criterion not in CRITERIA:
        raise OarsError(f"{where}compress.criterion must be one of {list(CRITERIA)}, got {settings.criterion!r}")
    for key in ("scope", "ignore"):
        value = getattr(settings, key)
        if isinstance(value, str):
            value = [value]
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise OarsError(f"{where}compress.{key} must be a list of module paths, got {value!r}")
        setattr(settings, key, value)
    for key, kind in (("steps", int), ("max_layer_ratio", float)):
        try:
            setattr(settings, key, kind(getattr(settings, key)))
        except (TypeError, ValueError):
            raise OarsError(f"{where}compress.{key} must be a number, got {getattr(settings, key)!r}") from None
    for key in ("target_flops", "target_params"):
        value = getattr(settings, key)
        if value is not None:
            try:
                setattr(settings, key, float(value))
            except (TypeError, ValueError):
                raise OarsError(f"{where}--{key.replace('_', '-')} must be a fraction such as 0.5, "
                                f"got {value!r}") from None
    if need_target and (settings.target_flops is None) == (settings.target_params is None):
        given = "both" if settings.target_flops is not None else "neither"
        raise OarsError(f"{where}--method prune needs one target, --target-flops F or --target-params P (or "
                        f"compress.target_flops / compress.target_params), got {given}")
    if settings.round_to is not None and (not isinstance(settings.round_to, int) or settings.round_to < 1):
        raise OarsError(f"{where}compress.round_to must be a positive integer, got {settings.round_to!r}")
    return settings


def variant_name(options: dict[str, Any], settings: PruneSettings) -> str:
    """The table's name of this variant: ``compress.variant`` / ``--variant``, else e.g. ``prune-flops0.5-l1``."""
    if options.get("variant"):
        return str(options["variant"])
    what = "flops" if settings.target_flops is not None else "params"
    value = settings.target_flops if settings.target_flops is not None else settings.target_params
    steps = f"-{settings.steps}steps" if settings.steps > 1 else ""
    return f"prune-{what}{value:g}-{settings.criterion}{steps}"
