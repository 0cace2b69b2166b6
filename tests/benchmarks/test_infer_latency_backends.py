"""benchmarks/infer_latency.py --backends (edge backends against ONNX Runtime FP32) in its cheapest form, as a user
runs it from the repository root, and its argument checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import infer_latency
from benchmarks.common import ROOT

SCRIPT = os.path.join(ROOT, "benchmarks", "infer_latency.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=600)


def test_cheapest_edge_run_prints_ratios_agreement_and_sizes(tmp_path):
    out = tmp_path / "rows.json"
    done = _run("--backends", "onnxruntime,ort", "--models", "unet_demo", "--size", "32", "--runs", "1",
                "--warmup", "0", "--threads", "1", "--precisions", "fp32", "int8", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| model | input | backend | precision | threads | median ms | x ORT FP32 | agreement | file MB |" \
        in done.stdout
    assert "| U-Net demo | 3x32x32 | onnxruntime | FP32 | 1 | " in done.stdout
    assert "| U-Net demo | 3x32x32 | ort | INT8 | 1 | " in done.stdout
    rows = json.loads(out.read_text())
    assert [(r["backend"], r["precision"]) for r in rows] == [("onnxruntime", "fp32"), ("onnxruntime", "int8"),
                                                              ("ort", "fp32"), ("ort", "int8")]
    fp32 = rows[0]
    assert fp32["agreement"] == 1.0 and 0 < fp32["x_ort_fp32"] < 10 and fp32["size_mb"] > 0
    assert rows[1]["size_mb"] < fp32["size_mb"]  # INT8 weights: a smaller file


@pytest.mark.parametrize("argv,message", [
    (["--backends", "onnxruntime,tflite"], "--backends: unknown ['tflite']; expected some of ['onnxruntime', "),
    (["--backends", "onnxruntime", "--threads", "0"], "--threads must be comma-separated counts of at least 1"),
    (["--backends", "onnxruntime", "--models", "faster_rcnn"], "--models ['faster_rcnn'] are not edge models"),
    (["--models", "tsm"], "--models ['tsm'] are for --backends only"),
])
def test_bad_backends_threads_and_models_are_one_line(argv, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["infer_latency.py", *argv])
    with pytest.raises(SystemExit) as code:
        infer_latency.main()
    assert code.value.code == 2 and message in capsys.readouterr().err


def test_raw_heads_rows_time_the_graph_and_the_runtime_decode(tmp_path):
    """``ssdlite_raw``: the graph that ends at the heads' maps (what NCNN and LiteRT hold), with its own ONNX Runtime
    reference, and a row for the runtime's NumPy decode + NMS that the raw graph leaves to the predictor."""
    out = tmp_path / "rows.json"
    done = _run("--backends", "onnxruntime", "--models", "ssdlite_raw", "--size", "64", "--runs", "1", "--warmup",
                "0", "--threads", "1", "--precisions", "fp32", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [(r["model"], r["backend"]) for r in rows] == [
        ("SSDLite320 MobileNetV3 (raw heads)", "onnxruntime"),
        ("SSDLite320 MobileNetV3 (raw heads)", "decode + NMS (NumPy)")]
    graph, decode = rows
    assert graph["agreement"] == 1.0 and graph["size_mb"] > 0
    assert decode["agreement"] is None and decode["size_mb"] == 0 and decode["median_ms"] > 0
    assert "| SSDLite320 MobileNetV3 (raw heads) | 3x64x64 | decode + NMS (NumPy) | FP32 | 1 | " in done.stdout
