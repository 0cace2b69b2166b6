"""Shared by the deploy/cpp tests: building oars_infer with its ONNX Runtime backend, running it, and matching its
detections with the Python predictor's."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
from demo_utils import ROOT

CPP_DIR = os.path.join(ROOT, "deploy", "cpp")
ORT_BUILD_DIR = os.path.join(CPP_DIR, "build-ort")
BOX_ATOL, SCORE_ATOL = 1e-2, 1e-3


def build_oars_infer_ort() -> str:
    """deploy/cpp built with ``-DONNXRUNTIME_ROOT=$OARS_ONNXRUNTIME_ROOT`` into its own folder (build-ort, so the
    default OpenCV-only build is left as it is); the binary's path. Skips without the variable (an ONNX Runtime
    C/C++ SDK: include/onnxruntime_cxx_api.h, lib/libonnxruntime.so) or without deploy/cpp's apt packages."""
    sdk = os.environ.get("OARS_ONNXRUNTIME_ROOT")
    if not sdk:
        pytest.skip("set OARS_ONNXRUNTIME_ROOT to an ONNX Runtime C/C++ SDK (include/, lib/) to build deploy/cpp "
                    "with its ONNX Runtime backend (OpenCV DNN cannot run NonMaxSuppression, RoiAlign or TopK)")
    env = dict(os.environ, OARS_CPP_BUILD_DIR=ORT_BUILD_DIR)
    proc = subprocess.run(["bash", os.path.join(CPP_DIR, "build.sh"), f"-DONNXRUNTIME_ROOT={sdk}"], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode == 2 and ("missing packages" in proc.stderr or "could not install" in proc.stderr):
        pytest.skip(f"deploy/cpp needs apt packages that cannot be installed here: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, f"deploy/cpp/build.sh failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return os.path.join(ORT_BUILD_DIR, "oars_infer")


def run_oars_infer(binary: str, model_dir: str, image: str, out: str, backend: str = "opencv") -> list[dict]:
    """oars_infer's JSON lines on ``image`` (a file or a folder); fails the test on a non-zero exit."""
    proc = subprocess.run([binary, "--model-dir", model_dir, "--image", image, "--out", out, "--backend", backend],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"oars_infer failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def match_detections(got: list[dict], ref: dict, image: str) -> None:
    """Every Python detection (``ref``: bboxes [K, 4], scores [K], labels [K]) has its own C++ record with the same
    label, box within BOX_ATOL px and score within SCORE_ATOL, and there are as many of each."""
    assert len(got) == len(ref["scores"]), f"{image}: C++ {len(got)} detections, Python {len(ref['scores'])}"
    unused = list(range(len(got)))
    for box, score, label in zip(ref["bboxes"], ref["scores"], ref["labels"]):
        match = next((k for k in unused if got[k]["label"] == int(label)
                      and np.abs(np.asarray(got[k]["bbox"]) - box).max() <= BOX_ATOL
                      and abs(got[k]["score"] - float(score)) <= SCORE_ATOL), None)
        assert match is not None, f"{image}: Python detection {box.tolist()} {score:.5f} {label} has no C++ partner"
        unused.remove(match)
