"""Video end to end through the command-line tools: a shrunk demo TSM trains a few iterations on a small generated
motion set, then eval (metrics.json, pictures, HTML report), infer on a folder (predictions.json, strips, an
unreadable video listed and skipped), export to ONNX and the deployed predictor on the same folder."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from demo_utils import ROOT
from demo_utils import run_tool as _tool
from metric_units import assert_one_unit

pytestmark = pytest.mark.slow

CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
EPOCHS = 2


def _overrides(data_root: str) -> list[str]:
    opts = {"model.backbone.base_channels": 8, "train_cfg.max_epochs": EPOCHS, "train_cfg.val_interval": EPOCHS,
            "default_hooks.logger.interval": 1, "default_hooks.checkpoint.interval": EPOCHS,
            "param_scheduler.1.T_max": EPOCHS}
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts.update({f"{split}.dataset.data_root": data_root, f"{split}.num_workers": 0,
                     f"{split}.persistent_workers": False, f"{split}.batch_size": 4})
    return [f"{k}={v}" for k, v in opts.items()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from video.demo_data import generate

    data = tmp_path_factory.mktemp("demo_videos")
    generate(data, num_train=16, num_val=8, size=64, num_frames=16)
    work = tmp_path_factory.mktemp("video_work")
    opts = _overrides(str(data))
    out = _tool("train.py", "-c", CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss_cls:" in log and "acc/top1" in log
    ckpt = (work / "last_checkpoint").read_text().strip()
    return data, work, ckpt, opts


def test_eval_writes_metrics_pictures_and_report(trained, tmp_path):
    data, work, ckpt, opts = trained
    shows = tmp_path / "pictures"
    out = _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(shows), "--report",
                "-o", *opts)
    assert "report written to" in out.stdout
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    assert 0.0 <= metrics["acc/top1"] <= 1.0 and metrics["acc/top5"] >= metrics["acc/top1"]
    assert (shows / "summary.png").exists() and len(list(shows.glob("*.gif"))) == 8
    html = (work / "report.html").read_text()
    assert "Confusion matrix" in html and "data:image/png;base64," in html
    for key in ("acc/top1", "acc/mean_class_accuracy"):  # one unit in metrics.json, report and log
        assert_one_unit(work, out.stdout + out.stderr, key)


@pytest.fixture(scope="module")
def folder(trained, tmp_path_factory):
    """Three validation videos and one file that is not a video."""
    data = trained[0]
    videos = tmp_path_factory.mktemp("videos")
    for name in ("00000.mp4", "00001.mp4", "00002.mp4"):
        shutil.copy(data / "videos" / "val" / name, videos / name)
    (videos / "broken.mp4").write_bytes(b"not a video")
    return videos


def test_infer_folder_writes_predictions_and_lists_unreadable(trained, folder, tmp_path):
    _, _, ckpt, opts = trained
    out_dir = tmp_path / "infer"
    proc = _tool("infer.py", "-c", CFG, "-w", ckpt, "-i", str(folder), "-o", str(out_dir), *opts, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "broken.mp4" in proc.stderr and "1 of 4 " in proc.stderr
    records = json.loads((out_dir / "predictions.json").read_text())
    assert [os.path.basename(r["video"]) for r in records] == ["00000.mp4", "00001.mp4", "00002.mp4"]
    classes = (trained[0] / "classes.txt").read_text().split()
    for rec in records:
        assert len(rec["topk"]) == 5 and rec["label_name"] == rec["topk"][0]["label"] in classes
        scores = [t["score"] for t in rec["topk"]]
        assert scores == sorted(scores, reverse=True) and 0.0 < sum(scores) <= 1.0 + 1e-5
        assert rec["total_frames"] == 16 and len(rec["frame_inds"]) == 8
    assert len(list(out_dir.glob("*_strip.png"))) == 3
    assert "00000.mp4: " in proc.stdout


def export_and_predict(trained, folder, tmp_path) -> tuple[list[dict], list[dict]]:
    """The export + deployed-predictor steps: tools/export.py to ONNX (with its ONNX Runtime self-check), then
    deploy/python/infer.py on the folder. Returns (PyTorch records, deployed records) of the readable videos."""
    _, _, ckpt, opts = trained
    export_dir = tmp_path / "export"
    _tool("export.py", "-c", CFG, "-w", ckpt, "-o", str(export_dir), *opts)
    assert (export_dir / "model.onnx").exists() and (export_dir / "deploy.yaml").exists()
    readable = tmp_path / "readable"
    readable.mkdir()
    for path in sorted(folder.glob("0*.mp4")):
        shutil.copy(path, readable / path.name)
    torch_dir, deploy_dir = tmp_path / "infer", tmp_path / "deploy_infer"
    _tool("infer.py", "-c", CFG, "-w", ckpt, "-i", str(readable), "-o", str(torch_dir), *opts)
    import subprocess

    proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy/python/infer.py"), "--model-dir",
                           str(export_dir), "-i", str(readable), "-o", str(deploy_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return (json.loads((torch_dir / "predictions.json").read_text()),
            json.loads((deploy_dir / "predictions.json").read_text()))


def test_export_and_deployed_predictor_agree_with_pytorch(trained, folder, tmp_path):
    ours, deployed = export_and_predict(trained, folder, tmp_path)
    assert len(ours) == len(deployed) == 3
    for a, b in zip(ours, deployed):
        assert a["frame_inds"] == b["frame_inds"] and a["label"] == b["label"]
        assert abs(a["score"] - b["score"]) < 1e-4
    # results.jsonl: one clip_classes record per video from both, the same keys, inputs, frames and labels
    from oars_deploy.records import read_results

    ref, got = read_results(str(tmp_path / "infer")), read_results(str(tmp_path / "deploy_infer"))
    assert len(ref) == len(got) == 3
    for a, b, old in zip(ref, got, ours):
        assert sorted(a) == sorted(b) == ["class", "frame_inds", "input", "label", "predictor", "score", "topk",
                                          "total_frames"]
        assert a["predictor"] == b["predictor"] == "clip_classes"
        assert (a["input"], a["label"], a["class"], a["frame_inds"]) == (b["input"], b["label"], b["class"],
                                                                          b["frame_inds"])
        assert (a["label"], a["class"]) == (old["label"], old["label_name"]) and len(a["topk"]) == 5
        assert abs(a["score"] - b["score"]) < 1e-4
