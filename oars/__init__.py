"""oars package.

Importing it first (``tools/*.py`` do) sets ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already names a
policy: libgomp, which torch's CPU kernels run on, reads it once when torch loads it, and its default lets idle
threads spin-wait, which makes training many times slower when other processes share the cores
(``benchmarks/contention.py``).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
