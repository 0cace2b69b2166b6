"""The OpenMP spin count is bounded before torch loads libgomp (which reads it once, at load), in every tool's
first import, and a spin count or wait policy the user set wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from demo_utils import ROOT

# Records GOMP_SPINCOUNT / OMP_WAIT_POLICY at the moment ``torch`` is first imported.
_SPY = """
import os, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(str(os.environ.get("GOMP_SPINCOUNT")) + "/" + str(os.environ.get("OMP_WAIT_POLICY")))
sys.meta_path.insert(0, Spy())
import {module}
import torch  # noqa: F401  (if the module itself did not)
print(seen[0])
"""


def _policy_at_torch_import(module: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    proc = subprocess.run([sys.executable, "-c", _SPY.format(module=module)], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


# The first import of tools/train.py, eval.py, export.py, infer.py (oars.cli) and tools/convert.py.
@pytest.mark.parametrize("module", ["oars.cli", "detection.datasets.converters"])
def test_spin_count_is_bounded_before_torch_loads(module):
    assert _policy_at_torch_import(module) == "100000/None"


def test_users_choice_wins():
    assert _policy_at_torch_import("oars.cli", OMP_WAIT_POLICY="ACTIVE") == "None/ACTIVE"
    assert _policy_at_torch_import("oars.cli", GOMP_SPINCOUNT="5000") == "5000/None"
