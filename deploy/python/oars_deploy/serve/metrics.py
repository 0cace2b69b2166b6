"""``GET /metrics``: request counts and latency per outcome, in the Prometheus text format (version 0.0.4).

Outcomes are the HTTP statuses the server answers /predict with (``200``, ``400``, ``401``, ``413``, ``415``,
``503``, ``500``). Latency is a histogram (seconds, cumulative buckets, ``_sum`` and ``_count``) per outcome.
With several replicas every replica reports to one :class:`MetricsStore` actor of the application (named after it),
so a scrape through any replica shows the whole application, not the replica that happened to answer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PREFIX = "oars_serve"


class Metrics:
    """Counters and latency histograms per outcome (thread-safe: replicas call from worker threads)."""

    def __init__(self, buckets: Sequence[float] = BUCKETS) -> None:
        self.buckets = np.asarray(buckets, dtype=np.float64)
        self.counts: dict[str, np.ndarray] = {}  # outcome -> int64 [len(buckets) + 1] (last: above every bucket)
        self.sums: dict[str, float] = {}
        self.lock = threading.Lock()

    def observe(self, outcome: str, seconds: float) -> None:
        """Count one request of ``outcome`` (e.g. '200') that took ``seconds``."""
        with self.lock:
            if outcome not in self.counts:
                self.counts[outcome] = np.zeros(len(self.buckets) + 1, np.int64)
                self.sums[outcome] = 0.0
            self.counts[outcome][int(np.searchsorted(self.buckets, seconds, side="left"))] += 1
            self.sums[outcome] += float(seconds)

    def total(self, outcome: str) -> int:
        """Requests counted with ``outcome``."""
        with self.lock:
            return int(self.counts[outcome].sum()) if outcome in self.counts else 0

    def render(self, extra: dict[str, float] | None = None) -> str:
        """The Prometheus text: ``oars_serve_requests_total{outcome}``, ``oars_serve_request_seconds`` histogram;
        ``extra`` adds gauges (``name -> value``, prefixed)."""
        lines = [f"# HELP {PREFIX}_requests_total /predict requests by HTTP status",
                 f"# TYPE {PREFIX}_requests_total counter"]
        with self.lock:
            items = sorted((k, v.copy(), self.sums[k]) for k, v in self.counts.items())
        for outcome, counts, _ in items:
            lines.append(f'{PREFIX}_requests_total{{outcome="{outcome}"}} {int(counts.sum())}')
        lines += [f"# HELP {PREFIX}_request_seconds /predict latency in the replica by HTTP status",
                  f"# TYPE {PREFIX}_request_seconds histogram"]
        for outcome, counts, total in items:
            cumulative = np.cumsum(counts)
            for le, n in zip(self.buckets, cumulative[:-1]):
                lines.append(f'{PREFIX}_request_seconds_bucket{{outcome="{outcome}",le="{le:g}"}} {int(n)}')
            lines.append(f'{PREFIX}_request_seconds_bucket{{outcome="{outcome}",le="+Inf"}} {int(cumulative[-1])}')
            lines.append(f'{PREFIX}_request_seconds_sum{{outcome="{outcome}"}} {total:.6f}')
            lines.append(f'{PREFIX}_request_seconds_count{{outcome="{outcome}"}} {int(cumulative[-1])}')
        for name, value in (extra or {}).items():
            lines += [f"# TYPE {PREFIX}_{name} gauge", f"{PREFIX}_{name} {value:g}"]
        return "\n".join(lines) + "\n"


class MetricsStore:
    """A Ray actor holding one application's :class:`Metrics` (see the module docstring)."""

    def __init__(self) -> None:
        self.metrics = Metrics()

    def observe(self, outcome: str, seconds: float) -> None:
        """:meth:`Metrics.observe`."""
        self.metrics.observe(outcome, seconds)

    def render(self, extra: dict[str, float] | None = None) -> str:
        """:meth:`Metrics.render`."""
        return self.metrics.render(extra)


def metrics_store(app_name: str):
    """The application's :class:`MetricsStore` actor, created by the first replica that asks (no CPU of its own;
    detached so that it outlives a replica that dies; the local ``oars-serve`` ends it with its Ray instance)."""
    import ray

    actor = ray.remote(num_cpus=0)(MetricsStore)
    return actor.options(name=f"oars_serve_metrics:{app_name}", namespace="oars_serve", get_if_exists=True,
                         lifetime="detached").remote()
