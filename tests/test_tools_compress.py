"""tools/compress.py end to end on the shrunk demo U-Net: --method prune to half the FLOPs with one fine-tuning
epoch of two iterations writes the generated config + ordinary checkpoints, exports the pruned model (ONNX Runtime
self-check), and the variant table (original + pruned); a re-run continues instead of pruning or measuring again (the
messages for an unreachable target or an unknown option: tests/oars/compress/test_prune.py)."""

from __future__ import annotations

import json

import pytest
from demo_utils import DEMO_CFG, demo_overrides, random_checkpoint, run_tool

SHRINK = {"model.backbone.base_channels": 8, "model.decode_head.channels": 4, "train_dataloader.batch_size": 8,
          "custom_hooks": "[]"}


@pytest.fixture(scope="module")
def compressed(demo_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compress")
    opts = demo_overrides(demo_data, **SHRINK)
    ckpt = random_checkpoint(DEMO_CFG, opts, folder)
    work = folder / "work"
    out = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "prune", "--target-flops", "0.5",
                   "--epochs", "1", "--work-dir", str(work), "-o", *opts)
    return work, ckpt, opts, out.stdout + out.stderr


def test_prune_writes_variant_config_checkpoint_export_and_table(compressed):
    work, _, _, log = compressed
    variant = work / "prune-flops0.5-l1"
    assert "pruned: flops" in log and "| original" in log and "| prune-flops0.5-l1" in log
    assert (variant / "pruned_config.yaml").exists() and (variant / "epoch_1.pth").exists()
    rows = {r["variant"]: r for r in json.loads((work / "compression.json").read_text())["rows"]}
    original, pruned = rows["original"], rows["prune-flops0.5-l1"]
    assert pruned["flops"] <= 0.5 * original["flops"] and pruned["params"] < original["params"]
    assert pruned["metric"] == "mIoU" and pruned["metric_value"] is not None
    assert pruned["latency_fp32_ms"] > 0 and pruned["size_of"] == "onnx" and pruned["size_mb"] < original["size_mb"]
    assert pruned["export_check"] and (variant / "export" / "model.onnx").exists()  # self-check passed
    assert "prune-flops0.5-l1" in (work / "compression.md").read_text()


def test_rerun_continues_instead_of_pruning_again(compressed):
    work, ckpt, opts, _ = compressed
    before = (work / "compression.json").read_text()
    out = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "prune", "--target-flops", "0.5",
                   "--epochs", "1", "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "not pruning again" in log and "pruned: flops" not in log and "not measuring again" in log
    assert (work / "compression.json").read_text() == before


def test_ptq_adds_its_int8_row_measured_on_the_export(compressed, demo_data):
    """--method ptq in the same work dir: the INT8 export (tools/export.py --int8), its metric from that export
    through the runtime predictor, its row beside the original's (measured once); no calibration folder is one
    message."""
    work, ckpt, opts, _ = compressed
    calib = f"{demo_data}/images/train"
    out = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "ptq", "--calib-dir", calib,
                   "--work-dir", str(work), "-o", *opts, "compress.ptq.calib_num=4", "compress.ptq.min_agreement=0")
    rows = {r["variant"]: r for r in json.loads((work / "compression.json").read_text())["rows"]}
    ptq, original = rows["ptq"], rows["original"]
    assert (work / "ptq" / "export" / "model_int8.onnx").is_file()
    assert (work / "ptq" / "eval" / "metrics.json").is_file()
    assert ptq["method"] == "ptq" and ptq["metric_of"] == "int8 export" and ptq["metric"] == "mIoU", out.stdout[-2000:]
    assert 0 <= ptq["metric_value"] <= 1 and ptq["latency_int8_ms"] > 0 and ptq["latency_fp32_ms"] > 0
    assert ptq["params"] == original["params"] and ptq["size_mb"] < original["size_mb"]  # int8 weights on disk
    assert list(rows)[0] == "original" and "| mIoU (int8 export) |" in (work / "compression.md").read_text()
    bad = run_tool("compress.py", "-c", DEMO_CFG, "-w", ckpt, "--method", "ptq", "--work-dir", str(work), "-o",
                   *opts, check=False)
    assert bad.returncode != 0 and "--method ptq calibrates the INT8 graph" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
