"""Config mistakes fail before anything is built (issue 37): a misspelt data loader argument and the keys of every
section mmengine's Runner builds itself, with did-you-mean; ``python -m oars.config.check`` builds the model to
validate values (``backbone.depth: 19``); ``_base_`` chains of any depth, cycles refused naming the chain."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from oars.config import ConfigError, cfg_provenance, load_config
from oars.config.check import config_problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YOLO = "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml"


def _run(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_misspelt_loader_argument_fails_before_the_runner_is_built_with_a_suggestion(tmp_path):
    proc = _run(os.path.join(ROOT, "tools/train.py"), "-c", os.path.join(ROOT, YOLO), "--work-dir",
                str(tmp_path / "wd"), "-o", "train_dataloader.batch_sizee=2")
    assert proc.returncode != 0
    out = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(out) <= 3, out  # one message, not ~400 log lines
    assert out[-1].startswith("error: -o: train_dataloader.batch_sizee: the data loader (torch.utils.data.DataLoader, "
                              "built by mmengine's Runner) has no argument 'batch_sizee'. Did you mean: batch_size? "
                              "Accepted: dataset, batch_size, "), out[-1]
    assert not (tmp_path / "wd").exists()  # nothing was built or written


def test_the_same_run_with_the_right_key_passes_the_check():
    assert config_problems(load_config(os.path.join(ROOT, YOLO), ["train_dataloader.batch_size=2"])) == []


@pytest.mark.parametrize(("override", "expected"), [
    ("val_dataloader.num_workres=0", "val_dataloader.num_workres: the data loader (torch.utils.data.DataLoader, built "
                                     "by mmengine's Runner) has no argument 'num_workres'. Did you mean: num_workers?"),
    ("env_cfg.cudnn_benchmarc=true", "env_cfg.cudnn_benchmarc: env_cfg (mmengine's Runner.setup_env) has no argument "
                                     "'cudnn_benchmarc'. Did you mean: cudnn_benchmark? Accepted: cudnn_benchmark, "
                                     "mp_cfg, dist_cfg, resource_limit"),
    ("randomness.seeed=1", "randomness.seeed: randomness (mmengine's Runner.set_randomness) has no argument 'seeed'. "
                           "Did you mean: seed?"),
    ("auto_scale_lr.enabled=true", "auto_scale_lr.enabled: auto_scale_lr (mmengine's Runner.scale_lr) has no "
                                   "argument 'enabled'. Did you mean: enable?"),
    ("train_cfg.max_epoch=3", "train_cfg.max_epoch: EpochBasedTrainLoop has no argument 'max_epoch'. Did you mean: "
                              "max_epochs? Accepted: max_epochs, val_begin, val_interval, dynamic_intervals"),
])
def test_every_runner_built_section_is_checked_with_did_you_mean(override, expected):
    problems = config_problems(load_config(os.path.join(ROOT, YOLO), [override]))
    assert len(problems) == 1 and problems[0].startswith(f"-o: {expected}"), problems


def test_typeless_sections_are_checked_against_the_class_mmengine_picks(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"_base_: {os.path.join(ROOT, YOLO)}\n"
                   "train_cfg: {_delete_: true, by_epoch: false, max_iters: 10, max_epochs: 2}\n"
                   "val_cfg: {_delete_: true, fp16: false, fp61: true}\n"
                   "log_processor: {_delete_: true, window_size: 5, windowsize: 5}\n")
    problems = {p.split(": ", 2)[1]: p for p in config_problems(load_config(str(cfg)))}
    assert sorted(problems) == ["log_processor.windowsize", "train_cfg.max_epochs", "val_cfg.fp61"], problems
    # by_epoch: false makes mmengine build an IterBasedTrainLoop; the message names the file that set the key
    assert problems["train_cfg.max_epochs"].startswith(f"{cfg}: train_cfg.max_epochs: IterBasedTrainLoop has no "
                                                       "argument 'max_epochs'.")
    assert "Did you mean: fp16?" in problems["val_cfg.fp61"]
    assert "LogProcessor has no argument 'windowsize'. Did you mean: window_size?" in problems[
        "log_processor.windowsize"]


def test_config_check_builds_the_model_to_validate_values(monkeypatch, capsys):
    from oars.config.check import main

    monkeypatch.chdir(ROOT)  # the config path as a user in the repository types it
    assert main([YOLO, "-o", "model.backbone.depth=19"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: -o: model.backbone.depth: building model.backbone (a DarkNet) failed: ValueError: DarkNet: depth=19 is "
        "not supported; accepted: [53]")
    assert main([YOLO]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{YOLO}: OK (model built: ") and out.rstrip().endswith(" parameters)"), out
    assert main([YOLO, "--no-build", "-o", "model.backbone.depth=19"]) == 0  # names only: depth is an argument
    assert capsys.readouterr().out.strip() == f"{YOLO}: OK"


def _write(folder, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_a_four_level_base_chain_merges_with_each_key_from_its_file(tmp_path):
    l4 = _write(tmp_path, "l4.yaml", "model: {type: A, depth: 4}\nx: 4\n")
    _write(tmp_path, "l3.yaml", "_base_: l4.yaml\nmodel: {width: 3}\n")
    l2 = _write(tmp_path, "l2.yaml", "_base_: [l3.yaml]\nx: 2\n")
    _write(tmp_path, "l1.yaml", "_base_: l2.yaml\nmodel: {depth: 1}\n")
    top = _write(tmp_path, "top.yaml", "_base_: l1.yaml\ny: 0\n")
    cfg = load_config(top)
    assert cfg.to_dict() == {"model": {"type": "A", "depth": 1, "width": 3}, "x": 2, "y": 0}
    prov = cfg_provenance(cfg)
    assert prov["model.type"] == l4 and prov["x"] == l2 and prov["model.depth"].endswith("l1.yaml")


def test_a_base_cycle_is_refused_naming_the_whole_chain(tmp_path):
    a = _write(tmp_path, "a.yaml", "_base_: b.yaml\n")
    b = _write(tmp_path, "b.yaml", "_base_: c.yaml\n")
    c = _write(tmp_path, "c.yaml", "_base_: a.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(a)
    assert str(err.value) == f"{c}: _base_ makes a cycle: {a} -> {b} -> {c} -> {a}"


def test_the_cpu_finetune_recipes_chain_four_levels_and_shrink_the_input():
    for name in ("fcos/fcos_r50_fpn", "retinanet/retinanet_r50_fpn", "faster_rcnn/faster_rcnn_r50_fpn",
                 "mask_rcnn/mask_rcnn_r50_fpn"):
        full = load_config(os.path.join(ROOT, f"configs/detection/{name}_finetune_demo_shapes.yaml"))
        cpu = load_config(os.path.join(ROOT, f"configs/detection/{name}_finetune_demo_shapes_cpu.yaml"))
        assert (full.model.data_preprocessor.min_size, full.model.data_preprocessor.max_size) == (800, 1333)
        assert (cpu.model.data_preprocessor.min_size, cpu.model.data_preprocessor.max_size) == (256, 256)
        cpu_rest = cpu.to_dict()
        cpu_rest["model"]["data_preprocessor"].update(min_size=800, max_size=1333)
        assert cpu_rest == full.to_dict()  # nothing else differs
        assert config_problems(cpu) == []


def test_the_cpu_video_recipe_changes_only_the_clips():
    full = load_config(os.path.join(ROOT, "configs/video/r2plus1d/r2plus1d_r18_finetune_demo_videos.yaml")).to_dict()
    cpu = load_config(os.path.join(ROOT, "configs/video/r2plus1d/r2plus1d_r18_finetune_demo_videos_cpu.yaml"))
    assert config_problems(cpu) == []
    cpu = cpu.to_dict()
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        sample = next(t for t in cpu[loader]["dataset"]["pipeline"] if t["type"] == "SampleFrames")
        assert sample["clip_len"] == 8
        cpu[loader]["dataset"]["pipeline"] = full[loader]["dataset"]["pipeline"]
    assert cpu == full  # nothing but the pipelines differs
