"""tools/compress.py --method distill | qat end to end on the shrunk demo U-Net: the variant folder, its export and
its row in the variant table. (The QAT run is `slow`: tests/oars/compress/test_qat.py runs the same path in-process.)
"""

from __future__ import annotations

import json

import pytest
from demo_utils import DEMO_CFG, demo_overrides, random_checkpoint, run_tool


@pytest.fixture(scope="module")
def setup(demo_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compress_qd")
    opts = demo_overrides(demo_data)
    return folder, random_checkpoint(DEMO_CFG, opts, folder), opts


def _rows(work) -> dict:
    return {r["variant"]: r for r in json.loads((work / "compression.json").read_text())["rows"]}


def test_distill_through_the_tool(setup):
    folder, ckpt, opts = setup
    work = folder / "work_distill"
    teacher = "[" + ", ".join(opts) + "]"  # the teacher: the same shrunk config (self-distillation)
    losses = ("[{student_layer: decode_head.conv_seg, teacher_layer: decode_head.conv_seg, "
              "loss: {type: ChannelWiseDistillLoss, temperature: 2.0}}]")
    args = ["compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "distill", "--work-dir", str(work),
            "--teacher-config", DEMO_CFG, "--teacher-weights", ckpt, "-o", *opts,
            f"compress.distill.teacher_overrides={teacher}", f"compress.distill.losses={losses}",
            "compress.distill.iters=2"]
    out = run_tool(*args)
    assert (work / "distill" / "student.pth").is_file() and (work / "distill" / "export" / "deploy.yaml").is_file()
    rows = _rows(work)
    row = rows["distill"]
    assert row["method"] == "distill" and row["latency_fp32_ms"] > 0, out.stdout[-2000:]
    assert rows["original"]["params"] == row["params"]  # self-distillation: the same network, measured once each
    checkpoints = sorted(p.name for p in (work / "distill").glob("iter_*.pth"))
    again = run_tool(*args)  # re-running continues the finished run: nothing trained twice, one row per variant
    assert sorted(p.name for p in (work / "distill").glob("iter_*.pth")) == checkpoints, again.stdout[-2000:]
    assert list(_rows(work)) == ["original", "distill"] and _rows(work)["distill"]["metric_value"] is not None


@pytest.mark.slow
def test_qat_through_the_tool(setup):
    folder, ckpt, opts = setup
    work = folder / "work_qat"
    out = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "qat", "--work-dir", str(work),
                   "-o", *opts, "compress.qat.iters=2", "compress.qat.val=false")
    assert "INT8 (QAT) vs FP32 graph: agreement" in out.stdout
    assert (work / "qat" / "export" / "model_int8.onnx").is_file()
    row = _rows(work)["qat"]
    assert row["method"] == "qat" and row["latency_int8_ms"] > 0
