"""GAN end to end through the tools: the pix2pix demo config, shrunk, trains a few iterations on a small generated
shapes set (in-process train, as tools/train.py runs it), writes its progress grids, then tools/eval.py (a
subprocess, as users run it) with --show-dir and --report, the ONNX export of the generator and the
deployed predictor (deploy/python/infer.py, no torch) on the label maps."""

from __future__ import annotations

import json
import os

import cv2
import pytest
from demo_utils import ROOT
from demo_utils import run_tool as _tool
from metric_units import assert_one_unit

pytestmark = pytest.mark.slow

CFG = os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_demo_shapes.yaml")


def _overrides(data_root: str) -> list[str]:
    opts = {"model.generator.ngf": 4, "model.generator.num_downs": 5, "model.discriminator.ndf": 4,
            "model.discriminator.n_layers": 1, "train_cfg.max_epochs": 1, "train_cfg.val_interval": 1,
            "default_hooks.logger.interval": 1, "default_hooks.checkpoint.interval": 1,
            "custom_hooks.0.interval": 2, "custom_hooks.0.num": 2,
            "train_dataloader.dataset.pipeline.1.scale": 36, "train_dataloader.dataset.pipeline.2.crop_size": 32,
            "val_dataloader.dataset.pipeline.1.scale": 32, "test_dataloader.dataset.pipeline.1.scale": 32,
            "export.input_shape": [1, 3, 32, 32]}
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts.update({f"{split}.dataset.data_root": data_root, f"{split}.num_workers": 0,
                     f"{split}.persistent_workers": False, f"{split}.batch_size": 2})
    return [f"{k}={v}".replace(" ", "") for k, v in opts.items()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import gan.engine  # noqa: F401 (the hooks; a fresh process finds them through gan.registry's locations)
    from oars.data.demo_shapes import generate
    from oars.engine.entry import train

    data = tmp_path_factory.mktemp("demo_shapes")
    generate(data, num_train=6, num_val=4, size=64)
    work = tmp_path_factory.mktemp("gan_work")
    opts = _overrides(str(data))
    runner = train(CFG, opts, work_dir=str(work))
    assert runner.iter == 3  # 6 pairs, batch 2
    ckpt = (work / "last_checkpoint").read_text().strip()
    return data, work, ckpt, opts


def test_training_writes_progress_grids(trained):
    _, work, _, _ = trained
    grids = sorted(p.name for p in (work / "samples").glob("*.png"))
    assert grids == ["iter_000002.png", "iter_000003.png"]  # every 2 iterations and after the last
    img = cv2.imread(str(work / "samples" / grids[0]))
    # one row of 2 samples, each input | output | target in 128 px panels
    assert 128 < img.shape[0] < 2 * 128 and img.shape[1] > 2 * 3 * 128


def test_eval_writes_metrics_pictures_and_report(trained, tmp_path):
    _, work, ckpt, opts = trained
    shows = tmp_path / "pictures"
    out = _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(shows), "--report",
                "-o", *opts)
    assert "report written to" in out.stdout + out.stderr
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    assert 0.0 < metrics["gan/psnr"] < 60.0 and -1.0 <= metrics["gan/ssim"] <= 1.0
    assert sorted(p.name for p in shows.iterdir()) == ["0000.png", "0001.png", "0002.png", "0003.png", "summary.png"]
    html = (work / "report.html").read_text()
    assert "Worst pairs by PSNR" in html and "gan/psnr" in html and html.count("data:image/png;base64,") == 1 + 4
    # the same numbers in metrics.json, report and log; PSNR in dB and SSIM a fraction, each named in the caption
    assert_one_unit(work, out.stdout + out.stderr, "gan/psnr", fraction=False)
    assert_one_unit(work, out.stdout + out.stderr, "gan/ssim", fraction=False)
    assert "PSNR in dB; SSIM and attribute accuracy are fractions 0–1" in html


def test_export_generator_and_deployed_predictor(trained, tmp_path):
    data, _, ckpt, opts = trained
    # oars.export.export_model (what tools/export.py calls) hands a GAN config to gan.export
    from oars.pipelines.export import export_model

    result = export_model(CFG, ckpt, str(tmp_path / "export"), overrides=opts)
    assert os.path.isfile(result["onnx"]) and os.path.isfile(result["deploy"])
    assert result["check"]["outputs"]  # ONNX Runtime reproduced PyTorch
    import subprocess
    import sys

    out_dir = tmp_path / "deployed"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy/python/infer.py"), "--model-dir",
                           str(tmp_path / "export"), "-i", str(data / "labels" / "val"), "-o", str(out_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    pictures = list(out_dir.rglob("*.png"))
    assert len(pictures) >= 4 and all(cv2.imread(str(p)) is not None for p in pictures)
    # results.jsonl: tools/infer.py and the deployed predictor write the same gan_images records
    from oars_deploy.records import read_results

    torch_dir = tmp_path / "torch_infer"
    _tool("infer.py", "-c", CFG, "-w", ckpt, "-i", str(data / "labels" / "val"), "-o", str(torch_dir), *opts)
    ref, got = read_results(str(torch_dir)), read_results(str(out_dir))
    assert len(got) == len(ref) == len(pictures) // 2 >= 2
    assert got == ref  # inputs, written names and (no) attributes: the same lines
    for rec in got:
        assert rec["predictor"] == "gan_images" and len(rec["images"]) == 2
        assert all((out_dir / name).is_file() and (torch_dir / name).is_file() for name in rec["images"])


def test_eval_model_dir_gives_the_checkpoints_metrics(trained, tmp_path):
    """tools/eval.py --model-dir on the generator export: the same PSNR / SSIM as the checkpoint on the same pairs
    (the graph's outputs rounded to whole pixel values as deployed: PSNR within 0.05 dB, SSIM within 2e-3)."""
    from oars.engine.entry import evaluate
    from oars.pipelines.export import export_model

    _, _, ckpt, opts = trained
    export_model(CFG, ckpt, str(tmp_path / "export"), overrides=opts)
    torch_metrics = evaluate(CFG, ckpt, opts, work_dir=str(tmp_path / "torch"))["metrics"]
    _tool("eval.py", "-c", CFG, "--model-dir", "export", "--work-dir", "onnx", "-o", *opts, cwd=str(tmp_path))
    written = json.loads((tmp_path / "onnx" / "metrics.json").read_text())
    onnx_metrics = written["metrics"]
    assert set(onnx_metrics) == set(torch_metrics) == {"gan/psnr", "gan/ssim"}
    assert abs(onnx_metrics["gan/psnr"] - torch_metrics["gan/psnr"]) <= 0.05
    assert abs(onnx_metrics["gan/ssim"] - torch_metrics["gan/ssim"]) <= 2e-3
    assert written["model_dir"] == str(tmp_path / "export")
