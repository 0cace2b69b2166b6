"""The predictor stands alone: ``pip install deploy/python`` into a fresh venv (numpy, opencv-python-headless,
pyyaml, onnxruntime; no torch, no training code) and its ``oars-infer`` writes the files tools/infer.py writes.

Slow (about 3 minutes on 2 shared cores, one of them creating the venv and installing onnxruntime and OpenCV
from the package index); the export and the tools/infer.py reference run in this (training) environment.
"""

from __future__ import annotations

import importlib
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, ROOT
from export_cases import shrunk_export_case

pytestmark = pytest.mark.slow

SIZE = 64
RUNTIME_ONLY = ("numpy", "opencv-python-headless", "pyyaml", "onnxruntime")


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH and no venv of the test run leaking into the subprocesses."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> str:
    """A venv with ``pip install deploy/python`` (a copy, so the checkout gets no build/ or egg-info)."""
    root = tmp_path_factory.mktemp("standalone")
    env_dir, src = str(root / "venv"), str(root / "src")
    shutil.copytree(osp.join(ROOT, "deploy", "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                                         "*.egg-info"))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", env_dir], check=True, env=_clean_env(), cwd=str(root))
    proc = subprocess.run([osp.join(env_dir, "bin", "pip"), "install", "-q", src], capture_output=True, text=True,
                          env=_clean_env(), cwd=str(root), timeout=1200)
    if proc.returncode != 0 and "No matching distribution" in proc.stderr:
        pytest.skip(f"the package index has no {RUNTIME_ONLY}: {proc.stderr[-500:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"venv with oars-deploy: {time.perf_counter() - start:.0f} s")
    return env_dir


def _venv_python(venv: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([osp.join(venv, "bin", "python"), "-c", code], capture_output=True, text=True,
                          env=_clean_env(), cwd=osp.dirname(venv))


def _images(folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(3):
        img = rng.integers(0, 60, (SIZE, SIZE, 3), dtype=np.uint8) + np.uint8(40 * i)
        cv2.circle(img, (SIZE // 3, SIZE // 2), SIZE // 5, (230, 60, 60), -1)
        cv2.rectangle(img, (SIZE // 2, SIZE // 4), (SIZE - 6, SIZE // 2), (60, 190, 90), -1)
        cv2.imwrite(osp.join(folder, f"img{i}.png"), img)
    return folder


def _export_and_reference(config: str, folder: str, overrides: list[str], images: str) -> str:
    """Shrunk random-weight model exported to ``folder``/export; tools/infer.py's files in ``folder``/torch."""
    from oars.pipelines.export import export_model

    cfg, ckpt = shrunk_export_case(config, folder, SIZE, overrides=overrides, standardise_logits=True)
    model_dir = osp.join(folder, "export")
    export_model(cfg, ckpt, model_dir)
    importlib.import_module(f"{cfg.default_scope}.apis").run_inference(cfg, ckpt, images, osp.join(folder, "torch"))
    return model_dir


def test_runtime_venv_has_no_torch_nor_training_code(venv):
    for name in ("torch", "oars", "detection", "segmentation", "matplotlib", "PIL", "mmengine"):
        proc = _venv_python(venv, f"import {name}")
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, f"{name} imports in the runtime venv"
    proc = _venv_python(venv, "import oars_deploy.cli, oars_deploy.draw; print(oars_deploy.cli.__file__)")
    assert proc.returncode == 0 and osp.join("site-packages", "oars_deploy") in proc.stdout, proc.stderr


@pytest.mark.parametrize("task", ["segmentation", "detection"])
def test_installed_predictor_writes_what_tools_infer_writes(venv, tmp_path, task):
    images = _images(str(tmp_path / "images"))
    if task == "segmentation":  # logits out of the graph: the predictor's argmax is PyTorch's, pixel for pixel
        model_dir = _export_and_reference(DEMO_CFG, str(tmp_path), ["export.output_op=none"], images)
    else:
        model_dir = _export_and_reference(DET_DEMO_CFG, str(tmp_path), [], images)
    out = str(tmp_path / "deploy")
    proc = subprocess.run([osp.join(venv, "bin", "oars-infer"), "--model-dir", model_dir, "-i", images, "-o", out],
                          capture_output=True, text=True, env=_clean_env(), cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = str(tmp_path / "torch")
    assert sorted(os.listdir(out)) == sorted(os.listdir(ref))
    if task == "segmentation":
        for name in sorted(os.listdir(ref)):  # label PNGs and pictures: the same bytes
            with open(osp.join(ref, name), "rb") as a, open(osp.join(out, name), "rb") as b:
                assert a.read() == b.read(), name
        return
    with open(osp.join(ref, "detections.json")) as f:
        want = json.load(f)
    with open(osp.join(out, "detections.json")) as f:
        got = json.load(f)
    assert [r["image"] for r in got] == [r["image"] for r in want]
    for r_got, r_want in zip(got, want):
        assert len(r_got["detections"]) == len(r_want["detections"]) > 0  # 8, 8, 11 boxes
        for a, b in zip(r_got["detections"], r_want["detections"]):
            assert (a["label"], a["class"]) == (b["label"], b["class"])
            np.testing.assert_allclose(a["bbox"], b["bbox"], rtol=0, atol=0.01 + 1e-6)  # ONNX vs eager floats
            assert abs(a["score"] - b["score"]) <= 1e-4 + 1e-5
    for i in range(3):
        vis_want = cv2.imread(osp.join(ref, f"img{i}_vis.png"))
        vis_got = cv2.imread(osp.join(out, f"img{i}_vis.png"))
        assert vis_got.shape == vis_want.shape
        assert (vis_got != vis_want).any(axis=2).mean() < 1e-3  # a box edge may round 1 px apart


def test_checkout_script_runs_with_the_runtime_only(venv, tmp_path):
    """``python deploy/python/infer.py`` from a checkout needs no path edit and no training packages."""
    proc = subprocess.run([osp.join(venv, "bin", "python"), osp.join(ROOT, "deploy", "python", "infer.py"),
                           "--model-dir", str(tmp_path), "-i", str(tmp_path / "images"), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, env=_clean_env(), cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: deploy file not found") and "Traceback" not in proc.stderr
