"""ACE2P through the export pipeline (self-check: ONNX Runtime against PyTorch) and end to end through the tools:
train -> eval (plain, flip TTA, flip TTA with the label swap) -> export -> the deployed predictor."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from demo_utils import ROOT
from demo_utils import run_tool as _tool
from export_cases import shrunk_export_case

from oars.export import read_deploy_yaml
from oars.pipelines.export import export_model
from segmentation.demo_figures import generate

CFG = os.path.join(ROOT, "configs", "segmentation", "ace2p", "ace2p_r18_demo_figures.yaml")
PAIRS = "[[3, 4], [5, 6]]"


def test_demo_config_exports_the_fused_map_with_parity(tmp_path):
    """The shrunk demo model at 64 px: the graph's output is the fused parsing map's argmax, ONNX Runtime agrees."""
    cfg, ckpt = shrunk_export_case(CFG, str(tmp_path), standardise_logits=True)
    result = export_model(cfg, ckpt, str(tmp_path / "export"))
    deploy = read_deploy_yaml(result["deploy"])
    assert deploy["model"]["task"] == "segmentation"
    assert deploy["input"]["shape"] == [1, 3, 64, 64]
    assert [o["name"] for o in deploy["outputs"]] == ["label"]
    assert len(deploy["labels"]) == 7
    assert set(result["check"]["outputs"]) == {"label"}


def _overrides(data: str) -> list[str]:
    opts = {}
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts.update({f"{split}.dataset.data_root": data, f"{split}.num_workers": 0,
                     f"{split}.persistent_workers": False, f"{split}.batch_size": 2})
    opts.update({"train_cfg.max_epochs": 1, "train_cfg.val_interval": 1, "default_hooks.logger.interval": 1,
                 "default_hooks.checkpoint.interval": 1, "model.backbone.base_channels": 8,
                 "model.backbone.stem_channels": "[8, 8, 16]", "model.decode_head.channels": 8,
                 "model.decode_head.context_channels": 8, "model.decode_head.edge_channels": 8})
    return [f"{k}={v}" for k, v in opts.items()]


@pytest.mark.slow
def test_train_eval_with_and_without_the_swap_export_and_deploy(tmp_path):
    data = str(tmp_path / "figures")
    generate(data, num_train=4, num_val=2, size=64)
    opts = _overrides(data)
    work = tmp_path / "work"
    out = _tool("train.py", "-c", CFG, "--work-dir", str(work), "-o", *opts)
    assert "decode.edge.loss_edge" in out.stdout + out.stderr
    ckpt = (work / "last_checkpoint").read_text().strip()
    results = {}
    for name, extra in (("plain", []), ("flip", ["model.test_cfg.aug={flip: true}"]),
                        ("swap", [f"model.test_cfg.aug={{flip: true, flip_label_pairs: {PAIRS}}}"])):
        out = _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(tmp_path / name), "-o", *opts, *extra)
        assert "mIoU" in out.stdout
        results[name] = json.loads((tmp_path / name / "metrics.json").read_text())["metrics"]
        assert {"aAcc", "mIoU", "mAcc"} <= set(results[name])
    bad = _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(tmp_path / "bad"), "-o", *opts,
                "model.test_cfg.aug={flip: true, flip_label_pairs: [[3, 7]]}", check=False)
    assert bad.returncode == 2 and "flip_label_pairs" in bad.stderr and "Traceback" not in bad.stderr
    export = tmp_path / "export"
    out = _tool("export.py", "-c", CFG, "-w", ckpt, "-o", str(export), *opts)
    assert "self-check passed" in out.stdout
    images = os.path.join(data, "val_images")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy/python/infer.py"), "--model-dir", str(export),
                           "-i", images, "-o", str(tmp_path / "deployed")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list((tmp_path / "deployed").glob("*.png"))) >= 2
