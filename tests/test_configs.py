"""Every config in configs/: passes yaml.safe_load, resolves every type, builds at full size, and
runs shrunk in loss / predict / tensor modes; its pipelines run on a synthetic sample."""

from __future__ import annotations

import copy
import glob
import os

import config_checks_detection
import config_checks_gan
import config_checks_segmentation
import config_checks_video
import model_sizes
import pytest
import torch
import yaml
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope

from oars.config import load_config
from oars.config.check import check_config
from oars.engine.runner import prepare_config

CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "**", "*.yaml"), recursive=True))
TOP_CONFIGS = [c for c in CONFIGS if "_base_" not in c]
TASK_CHECKS = {"segmentation": config_checks_segmentation, "detection": config_checks_detection,
               "video": config_checks_video, "gan": config_checks_gan}
IDS = [os.path.relpath(c, os.path.join(ROOT, "configs")) for c in TOP_CONFIGS]


def test_configs_exist():
    assert len(TOP_CONFIGS) >= 11


def test_model_sizes_table():
    """tests/model_sizes.py names only existing configs (a renamed config leaves no stale entry behind), and an
    entry whose count is not its source's number says why."""
    assert sorted(set(model_sizes.SIZES) - set(IDS)) == [], "entries in tests/model_sizes.py without a config"
    unexplained = [name for name, size in model_sizes.SIZES.items()
                   if (size.params != size.published) != bool(size.differs)]
    assert unexplained == [], "give `differs` exactly when params != published"


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.relpath(c, ROOT) for c in CONFIGS])
def test_plain_yaml(path):
    with open(path) as f:
        assert isinstance(yaml.safe_load(f), dict)


def _full_size(model_cfg) -> torch.nn.Module:
    """The full-size model for counting its parameters, built on the meta device where it can be (shapes only:
    no memory, no initialisation; C-TCN's 318 M parameters cost 1.3 GB and tens of seconds otherwise), else
    normally (a model whose constructor reads tensor values, e.g. YOLOv3's anchors or BMN's sampling mask)."""
    try:
        with torch.device("meta"):
            return MODELS.build(copy.deepcopy(model_cfg))
    except (RuntimeError, NotImplementedError):
        return MODELS.build(copy.deepcopy(model_cfg))


@pytest.mark.parametrize("path", TOP_CONFIGS, ids=IDS)
def test_config_resolves_and_builds(path, tmp_path):
    cfg = prepare_config(load_config(path), work_dir=str(tmp_path))
    check_config(cfg)  # every type in every registry, every argument name
    scope = cfg.default_scope
    checks = TASK_CHECKS[scope]
    with DefaultScope.overwrite_default_scope(scope):
        full = _full_size(cfg.model)
        if "num_classes" in cfg.model:  # unconditional GANs have none
            assert full.num_classes == cfg.model.num_classes
        model_sizes.check_size(os.path.relpath(path, os.path.join(ROOT, "configs")), full)
        model = MODELS.build(checks.shrink_model(cfg.model))
        # in the config's scope, as a Runner would run them: a registry build looks up the current default scope,
        # which a Runner built by an earlier test in this process may have left at another task's
        checks.run_all_modes(model, cfg.model.get("num_classes"))
        checks.run_pipelines(cfg, tmp_path)
