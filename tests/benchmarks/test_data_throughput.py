"""benchmarks/data_throughput.py runs at a tiny size as a user calls it (a subprocess from the repository root, the
loopback S3 started by the script itself) and writes its table and json; a bad flag is refused with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.common import ROOT


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "benchmarks/data_throughput.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # ~25 s: moto, the shards written to it, three loaders with 2 workers each
def test_data_throughput_runs_at_a_tiny_size_and_writes_its_json(demo_data, tmp_path):
    pytest.importorskip("moto.server", reason="moto[server] (the dev extra) runs the loopback S3")
    pytest.importorskip("s3fs", reason="s3fs (the data extra) reads s3:// URLs")
    out = tmp_path / "throughput.json"
    res = run("--data", demo_data, "--batches", "2", "--warmup", "1", "--repeats", "1", "--shard-size", "82kB",
              "--json", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    for text in ("| local | ", "| local shards | ", "| s3 shards | ", "(goal >= 0.9)", "| s3 files | ",
                 "| s3 shards, no read-ahead | ", "16 train samples", "2 workers", "moto's server in its own process"):
        assert text in res.stdout, (text, res.stdout)
    result = json.loads(out.read_text())
    assert result["samples"] == 16 and result["shards"] > 1
    assert set(result["sides"]) == {"local", "local shards", "s3 shards", "s3 shards, no read-ahead", "s3 files"}
    assert result["server"] == "process"
    assert result["sides"]["local"]["ratio"] == 1.0
    assert all(row["samples_per_s"] > 0 for row in result["sides"].values())


@pytest.mark.parametrize("args, message", [
    (["--batches", "0"], "--batches must be at least 1, got 0"),
    (["--workers", "-1"], "--workers must be 0 or more, got -1"),
    (["--server", "remote"], "--server: invalid choice: 'remote'"),
])
def test_data_throughput_refuses_a_bad_flag(args, message):
    res = run(*args, timeout=120)
    assert res.returncode == 2 and message in res.stderr
    assert "Traceback" not in res.stderr


def test_data_throughput_names_a_folder_that_is_not_a_demo_set(tmp_path):
    res = run("--data", str(tmp_path), "--batches", "1", "--repeats", "1", timeout=120)
    assert res.returncode == 1 and f"--data {tmp_path}: no images/train folder" in res.stderr
    assert "Traceback" not in res.stderr
