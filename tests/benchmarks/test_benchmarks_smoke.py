"""Every benchmark script runs in its cheapest form, as a user calls it (``python benchmarks/X.py ...`` from the
repository root), and every model choice a benchmark offers builds.

The benchmarks are not run by anything else, so a choice that cannot be built (``train_step.py --model faster_rcnn``
read ``default_scope`` from a model preset that has none) was found by the first user who asked for it. The choices
are built here in-process at a tiny size (the heavy ones take their step in a slow test); each script runs once as a
subprocess with its smallest flags (one thread, a tiny input, one timed run).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

import pytest

from benchmarks import contention, data_pipeline, infer_latency, seg_model_table, train_step
from benchmarks.common import ROOT

# script -> (its cheapest arguments, texts its output must contain); on the CPU where a default would pick CUDA
CHEAPEST = {
    "train_step.py": (["--model", "unet", "--size", "32", "--repeats", "1", "--warmup", "1", "--device", "cpu"],
                      ["U-Net S5-D16, 2x32x32, cpu, 1 steps each", "ratio oars / bare"]),
    "contention.py": (["--iters", "1", "--warmup", "1", "--busy", "0", "--repeats", "1", "--threads", "1"],
                      ["oars  with 0 busy processes: ", "oars idle / today idle: "]),
    "infer_latency.py": (["--models", "unet", "--size", "32", "--runs", "1", "--warmup", "0", "--batches", "1",
                          "--device", "cpu"],
                         ["| U-Net | 32x32 | 1 | pytorch eager |", "| U-Net | 32x32 | 1 | onnxruntime int8 |"]),
    "infer_memory.py": (["--size", "128"], ["peak RSS: 64x64 image ", "128x128 image "]),
    "compile_step.py": (["--quick", "--channels-last"], ["unet_tiny: 2 x 32 px, cpu", "ratio compiled / eager:",
                                                     "channels-last / contiguous: eager "]),
    "compile_reference.py": (["--quick"], ["torchvision resnet18, 2 x 32 px, contiguous, cpu, backend aot_eager",
                                           "  torch.compile :", "  oars settings :", "ratio to eager"]),
    "seg_model_table.py": (["--models", "unet", "--size", "32x64", "--repeats", "1", "--warmup", "0", "--no-check"],
                           ["| U-Net S5-D16 | unet_s5-d16_80k_cityscapes.yaml |"]),
    "serve_load.py": (["--models", "unet", "--clients", "1", "--requests", "2"],
                      ["| U-Net | on | 1 |", "| U-Net | off | 1 |"]),
    "stream_fps.py": (["--models", "unet", "--frames", "4", "--size", "64x48", "--repeats", "1", "--warmup", "0"],
                      ["stream vs predictor alone: 4 frames of 64x48", "| U-Net | "]),
    "prune_latency.py": (["--models", "unet_demo", "--size", "32", "--runs", "1", "--round-to", "0"],
                         ["| unet_demo | 32x32 | - | ", "latency pruned / original"]),
    "class_aware_sampling.py": (["--epochs", "1", "--num-train", "8", "--num-val", "4",
                                 "--data", os.path.join(tempfile.mkdtemp(prefix="oars_class_aware_"), "data"),
                                 "--work-dir", os.path.join(tempfile.mkdtemp(prefix="oars_class_aware_"), "w")],
                                ["training boxes per class", "class_aware ", "(AP, fractions 0-1)"]),
    "large_objects.py": (["--epochs", "1", "--num-train", "8", "--num-val", "4", "--anchors", "fitted9",
                          "--work-dir", os.path.join(tempfile.mkdtemp(prefix="oars_large_objects_"), "w")],
                         ["large shapes in ", "anchors fitted9 : COCO mAP "]),
    "tune_search.py": (["--trials", "2", "--budget-epochs", "1", "--num-train", "8", "--num-val", "4",
                        "--data", os.path.join(tempfile.mkdtemp(prefix="oars_tune_search_"), "data"),
                        "--work-dir", os.path.join(tempfile.mkdtemp(prefix="oars_tune_search_"), "w")],
                       ["U-Net demo: shipped config, 1 epochs: best mIoU", "| U-Net demo (mIoU) | 2 (",
                        "tune_search.json"]),
    "auto_prune.py": (["--train-epochs", "1", "--epochs", "1", "--steps", "2", "--rounds", "1", "--num-train", "8",
                       "--num-val", "4", "--latency-target", "0.95", "--latency-size", "64", "--latency-steps", "1",
                       "--data", os.path.join(tempfile.mkdtemp(prefix="oars_auto_prune_"), "data"),
                       "--work-dir", os.path.join(tempfile.mkdtemp(prefix="oars_auto_prune_"), "w")],
                      ["| U-Net demo | original |", "| U-Net demo | prune-uniform-l2 |", "| U-Net demo | auto-sa |",
                       "| U-Net demo | auto-optuna |", "(control) |", "| U-Net demo (trained), 64x64 |"]),
    "studio_overhead.py": (["--epochs", "1", "--logger-interval", "19",
                            "--data", os.path.join(tempfile.mkdtemp(prefix="oars_studio_overhead_"), "data")],
                           ["studio CPU watching"]),
}
# data_pipeline.py runs once per task, on a small generated set (tests below)
DATA_PIPELINE = ["--batches", "1", "--batch-size", "1", "--workers", "0"]

# train_step choices that take seconds per step even tiny (full-size R50 / DarkNet-53 detectors, SSD300's VGG-16 on
# the 300x300 it resizes every input to, 256-px pix2pix, CycleGAN's four networks): built in every run, stepped in
# the slow test
HEAVY_STEPS = {"yolov3", "faster_rcnn", "ssd300", "pix2pix", "cyclegan"}
# a small input each train_step model takes: (H, W), batch (BatchNorm on pooled maps needs batch 2 in training, as
# on SSDLite's 1x1 last level; pix2pix's U-Net-256 halves 256 px eight times; SSD resizes to 300 / 320 whatever
# comes in)
TINY = {"yolov3": ((64, 64), 1), "faster_rcnn": ((64, 64), 1), "retinanet": ((64, 64), 1), "fcos": ((64, 64), 1),
        "ssd300": ((64, 64), 1), "ssdlite": ((64, 64), 2), "tsm": ((32, 32), 1), "bmn": ((16, 16), 2),
        "deeplabv3": ((32, 32), 2), "unet": ((32, 32), 2), "icnet": ((64, 32), 2), "pix2pix": ((256, 256), 1),
        "cyclegan": ((64, 64), 1)}


def run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> args`` from the repository root on one thread, as a user runs it."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, os.path.join("benchmarks", script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def assert_ran(proc: subprocess.CompletedProcess, expected: list[str]) -> None:
    """Exit status 0 and every expected text in stdout (stderr shown when not)."""
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    missing = [text for text in expected if text not in proc.stdout]
    assert not missing, f"{missing} not in the output:\n{proc.stdout[-3000:]}"


def train_step_choices() -> list[tuple[str, str]]:
    """Every (``--model``, ``--preset``) pair train_step.py accepts; the preset matters for the detectors compared
    with torchvision only (``train_step.PRESETS``)."""
    return [(model, preset) for model in train_step.MODEL_CHOICES
            for preset in train_step.PRESETS.get(model, ["torchvision"])]


def test_every_benchmark_script_has_a_smoke_run():
    """A new script in benchmarks/ gets its cheapest form here (the modules without a command are helpers)."""
    scripts = set()
    for path in glob.glob(os.path.join(ROOT, "benchmarks", "*.py")):
        with open(path) as f:
            if 'if __name__ == "__main__":' in f.read():
                scripts.add(os.path.basename(path))
    # data_scale.py, data_throughput.py and studio_pages.py run in their own smoke tests (test_data_scale.py,
    # test_data_throughput.py: a tiny demo set on the loopback S3, test_studio_pages.py)
    assert scripts == {*CHEAPEST, "data_pipeline.py", "data_scale.py", "data_throughput.py", "studio_pages.py"}


# contention.py's cheapest form is still two fresh training processes with their DataLoader workers (~25 s)
# serve_load.py: a demo export and a local Ray (~60 s); compile_step.py: a torch.compile of a tiny U-Net (~15 s CPU);
# compile_reference.py: two aot_eager compiles of a ResNet-18 (~15 s);
# stream_fps.py: the U-Net demo export (~15 s CPU; its stream path runs on a tiny export in test_stream_fps.py)
# large_objects.py: one epoch of the YOLOv3 demo on 8 images through train.py, eval.py and optimize_anchors.py (~40 s)
# class_aware_sampling.py: two one-epoch trainings of the demo cascade on 8 images and their evaluations (~40 s)
# tune_search.py: three one-epoch trainings of the demo U-Net on 8 images, two of them a study (~1-2 min)
# auto_prune.py: a one-epoch training, three pruned variants fine-tuned, exported and timed, the control, a latency
# search (~2-4 min; both together took 6 min on two cores busy with other jobs)
# studio_overhead.py: a one-epoch U-Net demo run watched through the studio's event stream (~50 s)
SLOW_SCRIPTS = {"contention.py", "serve_load.py", "compile_step.py", "compile_reference.py", "stream_fps.py",
                "large_objects.py", "class_aware_sampling.py", "tune_search.py", "auto_prune.py",
                "studio_overhead.py"}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW_SCRIPTS else s
                                    for s in sorted(CHEAPEST)])
def test_cheapest_form_runs(script):
    args, expected = CHEAPEST[script]
    assert_ran(run_benchmark(script, *args), expected)


def test_data_pipeline_detection_runs(demo_data):
    proc = run_benchmark("data_pipeline.py", *DATA_PIPELINE, "--data", demo_data)
    assert_ran(proc, [f"YOLOv3 train pipeline (608 px output) on {demo_data}, batch 1, 1 batches", "workers=0: "])


def test_data_pipeline_video_runs(tmp_path):
    from video.demo_data import generate

    videos = str(tmp_path / "videos")
    generate(videos, num_train=2, num_val=2, num_frames=8)
    proc = run_benchmark("data_pipeline.py", "--task", "video", "--clips", "1", *DATA_PIPELINE, "--data", videos)
    assert_ran(proc, ["  pyav ", "  rawframes (JPEG) ", "pyav workers=0: "])
    with pytest.raises(SystemExit, match="no val_list.txt there"):
        data_pipeline.video_root(str(tmp_path / "none"))
    with pytest.raises(SystemExit, match="no annotations/instances_train.json there"):
        data_pipeline.detection_root(videos)


def test_data_pipeline_features_runs(tmp_path):
    from video.demo_long_videos import generate

    data = str(tmp_path / "long")
    generate(data, num_train=1, num_val=0, min_seconds=4, max_seconds=4)
    proc = run_benchmark("data_pipeline.py", "--task", "features", "--videos", "1", "--batch-size", "4",
                         "--workers", "0", "--data", data)
    assert_ran(proc, ["feature extraction (demo TSM-R18", "workers=0: ", "(4 snippets in "])  # 32 frames / 8
    with pytest.raises(SystemExit, match="no videos/ there"):
        data_pipeline.long_video_root(str(tmp_path / "none"))


def test_default_arguments_resolve():
    """The argument-less forms parse and pick each model's default size (what ``make bench`` runs)."""
    args = train_step.parse_args([])
    assert (args.model, args.preset, args.size, args.batch) == ("yolov3", "torchvision", (320, 320), 2)
    assert train_step.parse_args(["--model", "icnet"]).size == (1024, 512)
    assert train_step.parse_args(["--model", "pix2pix"]).size == (256, 256)
    assert train_step.parse_args(["--model", "ssdlite"]).size == (320, 320)
    with pytest.raises(SystemExit):
        train_step.parse_args(["--model", "ssd300", "--preset", "mmdet"])  # torchvision preset only
    args = contention.parse_args([])
    assert (args.iters, args.warmup, args.busy, args.repeats, args.threads) == (10, 3, 2, 3, 0)
    with pytest.raises(SystemExit):
        contention.parse_args(["--warmup", "0"])  # the first iteration has no start time: never timed


def test_contention_run_config_resolves(demo_data):
    """What each contention.py run trains (its subprocess run is slow): batches of 8, training alone."""
    from oars.engine.entry import load

    cfg = load(contention.CONFIG, contention.run_overrides(demo_data))
    assert cfg.train_dataloader.batch_size == contention.BATCH and cfg.train_dataloader.dataset.data_root == demo_data
    assert cfg.train_cfg.max_epochs == 1 and cfg.train_cfg.val_begin > 1 and cfg.param_scheduler == []


@pytest.mark.parametrize("model, preset", train_step_choices())
def test_every_train_step_choice_builds(model, preset):
    """Built through the function ``main`` uses; the cheap ones also take one step of each side."""
    size, batch = TINY[model]
    steps, title = train_step.build_steps(model, preset, size, batch, "cpu")
    expected = {"bare", "oars", "torchvision"} if model in train_step.PRESETS else {"bare", "oars"}
    assert set(steps) == expected and title.endswith(", cpu")
    if model not in HEAVY_STEPS:
        for step in steps.values():
            step()


@pytest.mark.slow
@pytest.mark.parametrize("model, preset", [c for c in train_step_choices() if c[0] in HEAVY_STEPS])
def test_heavy_train_step_choices_take_a_step(model, preset):
    size, batch = TINY[model]
    steps, _ = train_step.build_steps(model, preset, size, batch, "cpu")
    for step in steps.values():
        step()


# infer_latency models built at another size than 64: SSD's extra layers need their 300 / 320 px input
SPEC_SIZES = {"ssd300": 300, "ssdlite": 320}


@pytest.mark.parametrize("key", list(infer_latency.MODELS))
def test_every_infer_latency_model_builds_its_export_spec(key):
    size = SPEC_SIZES.get(key, 64)
    module, spec, options = infer_latency.build_spec(infer_latency.MODELS[key][1], size,
                                                     infer_latency.INPUT_HW.get(key))
    assert options.input_shape == (1, 3, size, size) and spec.input_name and not module.training


@pytest.mark.parametrize("key", list(seg_model_table.FAMILIES))
def test_every_seg_model_table_family_builds(key):
    cfg = seg_model_table.load_sized_config(os.path.join(ROOT, seg_model_table.FAMILIES[key][1]), (32, 64))
    params, params_train = seg_model_table.parameter_counts(seg_model_table.build_model(cfg))
    assert 0 < params <= params_train
