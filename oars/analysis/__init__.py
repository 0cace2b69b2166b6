"""Model and run analysis: parameter and FLOP counts (:mod:`oars.analysis.flops`, ``tools/get_flops.py``), training
logs (:mod:`oars.analysis.logs`, ``tools/analyze_logs.py``) and dataset browsing (:mod:`oars.analysis.browse`).

The FLOPs names are imported on first use (module ``__getattr__``): ``tools/analyze_logs.py`` needs no torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FlopsReport", "FlopsRow", "count_flops", "format_report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from oars.analysis import flops

        return getattr(flops, name)
    raise AttributeError(f"module 'oars.analysis' has no attribute {name!r}")
