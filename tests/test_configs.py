"""Every config in configs/: passes yaml.safe_load, resolves every type, builds at full size, and
runs shrunk in loss / predict / tensor modes; its pipelines run on a synthetic sample."""

from __future__ import annotations

import copy
import glob
import os
import random

import config_checks_detection
import config_checks_gan
import config_checks_segmentation
import config_checks_video
import model_sizes
import numpy as np
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


def _tensors(value) -> list[torch.Tensor]:
    """Every tensor in a model's raw outputs (a tensor, or nested tuples / lists / dicts of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _types(value) -> tuple[str, ...]:
    """Every ``type`` named in a config subtree, in order: configs that differ only in sizes, class counts or
    data share it."""
    if isinstance(value, dict):
        return ((value["type"],) if isinstance(value.get("type"), str) else ()) + _types(list(value.values()))
    if isinstance(value, (list, tuple)):
        return tuple(t for item in value for t in _types(item))
    return ()


def _one_per_architecture() -> list[str]:
    """The first config of each distinct set of model types (45 of the 75)."""
    first: dict[tuple, str] = {}
    for path in TOP_CONFIGS:
        first.setdefault(_types(load_config(path).model.to_dict()), path)
    return sorted(first.values())


ARCHITECTURES = _one_per_architecture()


@pytest.mark.parametrize("path", ARCHITECTURES,
                         ids=[os.path.relpath(c, os.path.join(ROOT, "configs")) for c in ARCHITECTURES])
def test_shrunk_model_runs_channels_last_as_it_runs_contiguous(path, monkeypatch):
    """``channels_last: true`` (oars.engine.memory_format) changes no model's results: the shrunk model, its 4-D
    weights channels-last, runs every mode (no ``view`` of a channels-last tensor refused); its eval-mode raw outputs
    after the same loss step equal the contiguous model's up to rounding, and its gradients from that step point the
    same way. Dropout is off in both: a random mask is drawn in memory order, so the two layouts get different
    (equally random) masks. A GAN re-initialises its weights inside the check (drawn in memory order too): its modes
    are run, its outputs not compared. The layers oneDNN gets wrong channels-last (``channels_last_blockers``: the
    narrow strided 1x1 shortcuts of shrunk ResNets; the runner would train such a model contiguous) are frozen in
    both, which keeps them out of oneDNN's bug."""
    from oars.engine.memory_format import channels_last_blockers, to_channels_last

    cfg = load_config(path)
    checks = TASK_CHECKS[cfg.default_scope]
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        torch.manual_seed(0)
        plain = MODELS.build(checks.shrink_model(cfg.model))
        for module in plain.modules():
            if isinstance(module, torch.nn.modules.dropout._DropoutNd):
                module.p = 0.0
        layers = dict(plain.named_modules())
        for blocker in channels_last_blockers(plain):  # shrunk ResNets' shortcuts: the runner would train such a
            layers[blocker.split(" (")[0]].weight.requires_grad_(False)  # model contiguous; frozen, it is safe
        fast = copy.deepcopy(plain)
        assert channels_last_blockers(fast) == []
        to_channels_last(fast)  # none in the models over precomputed features
        outputs = []
        real = getattr(checks, "loss_then_predict", None)  # the GAN checks step their own optimizers instead
        if real is not None:
            def recorded(model, make_batch):  # keeps the eval-mode raw outputs of each run
                result = real(model, make_batch)
                outputs.append(_tensors(result[1]))
                return result

            monkeypatch.setattr(checks, "loss_then_predict", recorded)
        for model in (plain, fast):
            torch.manual_seed(1)
            np.random.seed(1)
            random.seed(1)
            checks.run_all_modes(model, cfg.model.get("num_classes"))
    if outputs:
        assert len(outputs) == 2 and len(outputs[0]) == len(outputs[1]) > 0
        for want, got in zip(*outputs):
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)
        # the backward: rounding differences of the two layouts grow through BatchNorm over the shrunk models' 2x2
        # maps (YOLOv3: 10% in single weights from 1e-6 in the backbone's output; in float64 the two agree to 5e-15),
        # so the whole gradient's direction is compared: a layout bug scrambles it (cosine near 0); measured >= 0.997
        pairs = [(a.grad.flatten(), b.grad.flatten()) for a, b in zip(plain.parameters(), fast.parameters())
                 if a.grad is not None]
        assert pairs
        want, got = torch.cat([a for a, _ in pairs]), torch.cat([b for _, b in pairs])
        assert float(torch.nn.functional.cosine_similarity(want, got, dim=0)) > 0.99
