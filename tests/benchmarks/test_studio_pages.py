"""benchmarks/studio_pages.py as a user runs it (a subprocess from the repository root): at a tiny size it starts a
studio, loads every page in chromium and prints the table and writes its json (slow: a scan and a browser); a size
that is not positive is refused with one line before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.common import ROOT

pytest.importorskip("fastapi", reason="the studio extra is not installed (pip install -e .[studio])")


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/studio_pages.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_studio_pages_at_a_tiny_size(tmp_path):
    pytest.importorskip("playwright", reason="Playwright (dev dependency) drives the browser")
    if not os.path.isfile("/usr/bin/chromium"):
        pytest.skip("no /usr/bin/chromium")
    out = tmp_path / "pages.json"
    res = _run("--images", "8", "--runs", "2", "--loads", "1", "--json", str(out))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "| datasets grid, page 1 (8 images) | cold |" in res.stdout and "| runs table (3 runs) | - |" in res.stdout
    assert "| live run page: first event | - |" in res.stdout
    results = json.loads(out.read_text())
    assert (results["images"], results["runs"], results["loads"]) == (8, 2, 1)
    for row in results["pages"]:
        assert 0 < row["fcp"] and 0 < row["interactive"] <= row["dcl"] <= row["load"], row
    live = [row for row in results["pages"] if row["page"].startswith("live run page")]
    assert len(live) == 2 and all(row["part"] > 0 for row in live)


def test_a_size_that_is_not_positive_is_refused():
    res = _run("--loads", "0", timeout=120)
    assert res.returncode == 2 and "--loads 0: expected a positive number" in res.stderr
    assert "Traceback" not in res.stderr
