"""oars package.

Importing it first (``tools/*.py`` do) bounds how long idle OpenMP threads spin-wait: libgomp, which torch's CPU
kernels run on, lets a thread that finished its share of a parallel region spin for ``GOMP_SPINCOUNT`` iterations
(300,000 by default) before it sleeps. Beside other busy processes those spinning threads hold the cores that the
threads they wait for need, and training becomes many times slower (``benchmarks/contention.py``: 4-5x with two
busy processes on 2 cores, up to 30x seen in ``make demo`` next to other jobs).

``GOMP_SPINCOUNT=100000`` keeps the idle speed (within 5% of the default, measured; ``OMP_WAIT_POLICY=PASSIVE``,
no spinning at all, made the idle YOLOv3 demo 2x slower: every small parallel region then pays a thread wake-up)
and takes the slowdown beside two busy processes to about 2x. libgomp reads the variable once, when torch loads it,
so it is set here, before anything imports torch. A ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` of the user's wins.
"""

import os

if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "100000")


def __getattr__(name: str):
    """``oars.Model`` / ``oars.Result`` (:mod:`oars.api`), imported on first use: ``import oars`` stays as cheap as
    above (no torch) for the tools and the runtime-free paths that import it first."""
    if name in ("Model", "Result"):
        from oars import api

        return getattr(api, name)
    raise AttributeError(f"module 'oars' has no attribute {name!r}")
