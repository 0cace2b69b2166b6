"""Say what ``torch.compile`` made of the training step: graphs, graph breaks, functions left to eager."""

from __future__ import annotations

import logging
import time

from mmengine.hooks import Hook
from mmengine.logging import print_log

from oars.registry import HOOKS


@HOOKS.register_module()
class CompileReportHook(Hook):
    """Logs once after the first training step how dynamo compiled ``train_step`` (the number of graphs, the graph
    breaks with their first reasons, the functions it left to eager Python, and how long that first step took with
    its compilation), then again each time a later step adds graphs (recompilations for new shapes), breaks or
    eager fallbacks. A warning when there are breaks or fallbacks: the user decides whether they matter.

    Added by the engine when ``compile`` is on (``oars.engine.compile.resolve_compile``).

    Args:
        max_reasons: how many distinct reasons each message lists.
    """

    priority = "VERY_LOW"

    def __init__(self, max_reasons: int = 5) -> None:
        self.max_reasons = int(max_reasons)
        self._before = None
        self._first_done = False
        self._step_start: float | None = None
        self.reports: list[str] = []  # every message logged (for tests and callers)

    def before_train(self, runner) -> None:
        from oars.engine.compile import snapshot

        self._before = snapshot()  # counts of this run only (dynamo's counters are process-wide)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if not self._first_done:
            self._step_start = time.perf_counter()

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        from oars.engine.compile import format_stats, snapshot, stats_since

        if self._before is None:  # trained without before_train (a caller driving the loop itself)
            self._before = snapshot()
        now = snapshot()
        stats = stats_since(self._before, now)
        if self._first_done and stats.empty:
            return
        message = format_stats(stats, first=not self._first_done, limit=self.max_reasons)
        if not self._first_done and self._step_start is not None:
            message += f"; the first step took {time.perf_counter() - self._step_start:.1f} s with compilation"
        noisy = bool(stats.graph_breaks or stats.eager_frames or (self._first_done and stats.graphs))
        print_log(message, logger="current", level=logging.WARNING if noisy else logging.INFO)
        self.reports.append(message)
        self._first_done = True
        self._before = now
