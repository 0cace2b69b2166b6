"""The options of ``tools/compress.py --method auto-prune`` and ``--method sensitivity``: the pruning keys they share
with ``--method prune`` (scope, ignore, criterion, max_layer_ratio, round_to; checked by
:func:`oars.compress.options.prune_settings`) and their own, each checked once with a message naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oars.errors import OarsError
from oars.extras import require_extra

from .auto_prune_search import REFINE_ROUNDS
from .options import prune_settings
from .prune import PruneSettings
from .sa_controller import INIT_TEMPERATURE, MAX_TRY_TIMES, REDUCE_RATE, REWARD_SCALE

SEARCHES = ("sa", "optuna")
AUTO_KEYS = ("target_latency", "search", "max_groups", "ratio_step", "calib_batches", "val_batches", "seed",
             "init_temperature", "reduce_rate", "max_try_times", "sa_scale", "latency_threads", "ratios",
             "refine_rounds")
DEFAULT_STEPS = 300  # PaddleSlim AutoPruner's max_try_times, used as the number of search steps
LATENCY_THREADS = 1  # one ONNX Runtime thread: a budget measured on all cores of a shared machine does not repeat
SENSITIVITY_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class AutoPruneSettings:
    """What the search (or the sensitivity analysis) does beyond how a layer is pruned (``prune``).

    ``target_flops``: the budget as a fraction of the original FLOPs; ``target_latency``: as ONNX Runtime
    milliseconds measured on this machine (exactly one is set for auto-prune, none for sensitivity). ``ratio_step``:
    a token's unit (token t prunes a group by t x ratio_step of its channels). ``calib_batches``/``val_batches``: the
    proxy score's training batches for BatchNorm re-calibration and validation batches for the metric. ``sa_scale``:
    what simulated annealing multiplies reward differences by (100: metrics in [0, 1] compared in percentage points,
    see :mod:`oars.compress.sa_controller`). ``latency_threads``: ONNX Runtime's intra-op threads for every latency
    the search measures (the original's and each candidate's, so the budget and the candidates are timed alike; 0:
    ONNX Runtime's default, all cores). ``refine_rounds``: bisection rounds that scale the search's best ratios
    toward the budget (:func:`oars.compress.auto_prune_search.refine_to_budget`; 0: the search's best as it is)."""

    prune: PruneSettings
    target_flops: float | None = None
    target_latency: float | None = None
    search: str = "sa"
    steps: int = DEFAULT_STEPS
    max_groups: int = 16
    ratio_step: float = 0.05
    calib_batches: int = 4
    val_batches: int = 4
    seed: int = 0
    init_temperature: float = INIT_TEMPERATURE
    reduce_rate: float = REDUCE_RATE
    max_try_times: int = MAX_TRY_TIMES
    sa_scale: float = REWARD_SCALE
    latency_threads: int = LATENCY_THREADS
    refine_rounds: int = REFINE_ROUNDS
    ratios: list[float] = field(default_factory=lambda: list(SENSITIVITY_RATIOS))


def _number(options: dict[str, Any], key: str, kind: type, where: str, low: float, high: float | None = None) -> Any:
    """``options[key]`` as ``kind`` within ``[low, high]`` (``high`` None: no upper end)."""
    value = options[key]
    try:
        number = kind(value)
        if isinstance(value, bool) or (kind is int and number != value):
            raise ValueError
    except (TypeError, ValueError):
        raise OarsError(f"{where}compress.{key} must be {'an integer' if kind is int else 'a number'}, "
                        f"got {value!r}") from None
    if number < low or (high is not None and number > high):
        span = f">= {low:g}" if high is None else f"in [{low:g}, {high:g}]"
        raise OarsError(f"{where}compress.{key} must be {span}, got {value!r}")
    return number


def auto_prune_settings(options: dict[str, Any], filename: str | None = None,
                        method: str = "auto-prune") -> AutoPruneSettings:
    """The checked settings of ``--method auto-prune`` (``method='sensitivity'``: no budget is needed or taken).

    Raises:
        OarsError: an unknown option; both budgets or none (auto-prune); ``--target-params`` (auto-prune searches
            under FLOPs or latency); a fraction outside (0, 1) or a latency <= 0; ``--target-latency`` without ONNX
            Runtime (the extra that installs it); an unknown search; a number out of its range (each named).
    """
    where = f"{filename}: " if filename else ""
    shared = {k: v for k, v in options.items() if k not in ("target_flops", "target_params", "steps")}
    settings = AutoPruneSettings(prune=prune_settings(shared, filename, method=method, extra_keys=AUTO_KEYS,
                                                      need_target=False))
    given = {k: options.get(k) for k in ("target_flops", "target_latency", "target_params")
             if options.get(k) is not None}
    if method == "auto-prune":
        if "target_params" in given:
            raise OarsError(f"{where}--method auto-prune searches under a FLOPs or latency budget: give "
                            f"--target-flops F or --target-latency MS instead of --target-params")
        if len(given) != 1:
            what = "both" if given else "neither"
            raise OarsError(f"{where}--method auto-prune needs one budget, --target-flops F (a fraction of the "
                            f"original FLOPs) or --target-latency MS (ONNX Runtime milliseconds on this machine), "
                            f"not both; got {what}")
    elif given:
        raise OarsError(f"{where}--method {method} takes no budget; got {sorted(given)}")
    if "target_flops" in given:
        value = _number(options, "target_flops", float, where, 0.0, 1.0)
        if not 0.0 < value < 1.0:
            raise OarsError(f"{where}--target-flops must be a fraction of the original in (0, 1), got {value!r}")
        settings.target_flops = value
    if "target_latency" in given:
        value = _number(options, "target_latency", float, where, 0.0)
        if value <= 0:
            raise OarsError(f"{where}--target-latency must be a time in milliseconds > 0, got {value!r}")
        for package in ("onnxruntime", "onnx", "onnxscript"):  # each candidate is exported and timed
            require_extra(package, "--target-latency (ONNX Runtime latency of each candidate's export)")
        settings.target_latency = value
    search = options.get("search") or "sa"
    if search not in SEARCHES:
        raise OarsError(f"{where}--search must be one of {list(SEARCHES)}, got {search!r}")
    settings.search = search
    if options.get("steps") is not None:
        settings.steps = _number(options, "steps", int, where, 1)
    for key, kind, low, high in (("max_groups", int, 1, None), ("ratio_step", float, 0.01, 0.5),
                                 ("calib_batches", int, 0, None), ("val_batches", int, 1, None),
                                 ("seed", int, 0, None), ("init_temperature", float, 1e-9, None),
                                 ("reduce_rate", float, 1e-9, 1.0), ("max_try_times", int, 1, None),
                                 ("sa_scale", float, 1e-9, None), ("latency_threads", int, 0, None),
                                 ("refine_rounds", int, 0, 20)):
        if options.get(key) is not None:
            setattr(settings, key, _number(options, key, kind, where, low, high))
    if options.get("ratios") is not None:
        ratios = options["ratios"]
        if not (isinstance(ratios, (list, tuple)) and ratios
                and all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 < r < 1 for r in ratios)):
            raise OarsError(f"{where}compress.ratios must be a list of prune ratios in (0, 1), got {ratios!r}")
        settings.ratios = sorted(float(r) for r in ratios)
    return settings


def auto_variant_name(options: dict[str, Any], settings: AutoPruneSettings) -> str:
    """The table's name of an auto-prune variant: ``--variant``, else e.g. ``auto-prune-flops0.5-sa``."""
    if options.get("variant"):
        return str(options["variant"])
    budget = f"flops{settings.target_flops:g}" if settings.target_flops is not None \
        else f"latency{settings.target_latency:g}ms"
    return f"auto-prune-{budget}-{settings.search}"


__all__ = ["AUTO_KEYS", "DEFAULT_STEPS", "LATENCY_THREADS", "SEARCHES", "SENSITIVITY_RATIOS", "AutoPruneSettings",
           "auto_prune_settings", "auto_variant_name"]
