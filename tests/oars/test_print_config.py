"""``tools/train.py --print-config``: the resolved config with the source of every value oars set, printed
without training or creating a work dir; a bad config fails with the same one-line error as training."""

from __future__ import annotations

import os

import yaml
from demo_utils import DEMO_CFG, run_tool

from oars.config.resolved import RESOLVED_KEY
from oars.engine.resolve import ENGINE_HOOKS

CFG = os.path.relpath(DEMO_CFG, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_print_config_shows_injected_hooks_with_source_and_creates_no_work_dir(tmp_path):
    work = tmp_path / "work"
    proc = run_tool("train.py", "-c", CFG, "--print-config", "--work-dir", str(work), "-o", "train_cfg.max_epochs=1")
    assert not work.exists()  # nothing built, nothing written
    printed = yaml.safe_load(proc.stdout)  # stdout is the config and nothing else
    assert printed["work_dir"] == str(work) and printed["train_cfg"]["max_epochs"] == 1
    assert not {"resume", "load_from", "launcher", "experiment_name"} & set(printed)  # as config.yaml
    resolved = printed[RESOLVED_KEY]
    hooks = [h["type"] for h in printed["custom_hooks"]]
    for name in ENGINE_HOOKS:
        index = hooks.index(name)
        assert resolved[f"custom_hooks[{index}]"]["value"] == {"type": name}
        assert resolved[f"custom_hooks[{index}]"]["source"].startswith("engine: ")
    assert "exact resume needs RNGStateHook" in proc.stdout
    assert resolved["default_hooks.checkpoint.type"]["value"] == "AtomicCheckpointHook"
    assert "replaces mmengine's CheckpointHook" in resolved["default_hooks.checkpoint.type"]["source"]
    assert resolved["work_dir"]["source"] == "--work-dir flag"
    assert resolved["train_cfg.max_epochs"] == {"value": 1, "source": "-o (command line)"}


def test_print_config_amp_flag_is_a_source(tmp_path):
    proc = run_tool("train.py", "-c", CFG, "--print-config", "--amp", "--work-dir", str(tmp_path / "w"))
    resolved = yaml.safe_load(proc.stdout)[RESOLVED_KEY]
    assert resolved["optim_wrapper.type"]["value"] == "MixedPrecisionOptimWrapper"
    assert resolved["optim_wrapper.type"]["source"].startswith("--amp flag")


def test_print_config_bad_config_fails_like_training(tmp_path):
    bad = ["-o", "model.backbone.base_chanels=4"]
    printed = run_tool("train.py", "-c", CFG, "--print-config", "--work-dir", str(tmp_path / "a"), *bad, check=False)
    trained = run_tool("train.py", "-c", CFG, "--work-dir", str(tmp_path / "b"), *bad, check=False)
    assert printed.returncode == trained.returncode == 2
    assert printed.stdout == ""
    assert "Traceback" not in printed.stderr
    assert printed.stderr == trained.stderr
    assert "base_chanels" in printed.stderr and "Did you mean: base_channels" in printed.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# What the R-CNN heads would otherwise take from code (``DEFAULT_*`` in detection/models/roi_heads): every config
# states it, so its printed config (and config.yaml) shows the RoI layer, box coder and losses that run.
_STATED = {"SingleRoIExtractor": ("roi_layer",), "StandardRoIHead": ("bbox_roi_extractor", "bbox_head"),
           "CascadeRoIHead": ("bbox_roi_extractor", "bbox_head"), "FCNMaskHead": ("loss_mask",)}
_BBOX_HEAD_STATED = ("bbox_coder", "loss_cls", "loss_bbox")


def _typed(value, path):
    if isinstance(value, dict):
        if "type" in value:
            yield path, value
        for key, item in value.items():
            yield from _typed(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _typed(item, f"{path}[{i}]")


def test_rcnn_configs_state_the_head_defaults():
    import glob

    from oars.config import load_config

    root = os.path.dirname(DEMO_CFG).rsplit("/configs/", 1)[0]
    files = sorted({*glob.glob(f"{root}/configs/_base_/models/*rcnn*.yaml"),
                    *glob.glob(f"{root}/configs/detection/*rcnn*/*.yaml")})
    assert len(files) >= 14
    missing = []
    for file in files:
        model = load_config(file).to_dict()["model"]
        for path, node in _typed(model, "model"):
            kind = node["type"]
            wanted = _STATED.get(kind, _BBOX_HEAD_STATED if str(kind).endswith("BBoxHead") else ())
            missing += [f"{os.path.relpath(file, root)}: {path}.{key}" for key in wanted if key not in node]
    assert not missing, missing
