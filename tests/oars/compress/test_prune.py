"""Structured pruning (oars.compress): a shrunk demo U-Net pruned to a FLOPs target stays a valid network in all
three modes, its generated config rebuilds the pruned shapes and loads the pruned weights strictly, an unreachable
target says what is reachable, and the variant table keeps one row per variant (Markdown, JSON, report.html)."""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch
from demo_utils import DEMO_CFG, ROOT, demo_overrides, random_checkpoint

from oars.compress.measure import count_flops
from oars.compress.options import prune_settings
from oars.compress.prune import PruneSettings, prune_to_target
from oars.compress.pruned_model import apply_pruned_shapes
from oars.compress.table import add_row, read_rows
from oars.config import load_config
from oars.errors import OarsError
from oars.pipelines.compress.prune import PRUNED_CONFIG, PRUNED_INIT, model_and_batch, write_pruned

SHRINK = {"model.backbone.base_channels": 8, "model.decode_head.channels": 4, "train_dataloader.batch_size": 2}


@pytest.fixture(scope="module")
def pruned(demo_data, tmp_path_factory):
    """The shrunk demo U-Net (random weights) pruned to half its FLOPs, with the files tools/compress.py writes."""
    folder = tmp_path_factory.mktemp("prune")
    overrides = demo_overrides(demo_data, **SHRINK)
    ckpt = random_checkpoint(DEMO_CFG, overrides, folder)
    cfg = load_config(DEMO_CFG, overrides)
    model, data = model_and_batch(cfg, ckpt)
    small = data["inputs"][:1, :, :32, :32]  # tracing and FLOP counting need no more
    net, report = prune_to_target(model, small, PruneSettings(target_flops=0.5))
    write_pruned(cfg, model, net, report, ckpt, str(folder / "variant"))
    return cfg, model, net, report, data, folder / "variant"


def test_pruning_meets_the_flops_target_and_keeps_the_network_valid(pruned):
    _, model, net, report, data, _ = pruned
    small = data["inputs"][:1, :, :32, :32]
    assert count_flops(net, small) <= 0.5 * count_flops(model, small)
    assert report.after / report.before <= 0.5 and report.params_after < report.params_before
    assert net.backbone.encoder[0][0][0].out_channels < model.backbone.encoder[0][0][0].out_channels
    assert net.decode_head.conv_seg.out_channels == model.decode_head.conv_seg.out_channels  # head output kept
    trained = copy.deepcopy(net).train()  # the fixture's net stays as saved (BN statistics)
    losses = trained(data["inputs"], data["data_samples"], mode="loss")
    assert all(torch.isfinite(v).all() for v in losses.values() if isinstance(v, torch.Tensor))
    net.eval()
    with torch.no_grad():
        preds = net(data["inputs"], data["data_samples"], mode="predict")
        out = net(data["inputs"], mode="tensor")
    assert len(preds) == len(data["data_samples"]) and out.shape[1] == model.decode_head.conv_seg.out_channels


def test_generated_config_rebuilds_the_pruned_shapes_and_loads_the_checkpoint(pruned):
    from oars.pipelines.model import init_model

    original, _, net, _, data, folder = pruned
    cfg = load_config(str(folder / PRUNED_CONFIG))
    assert cfg.model.type == "PrunedModel" and cfg.model.pruned_from == original.model.type
    assert "compress" not in cfg and "work_dir" not in cfg
    rebuilt = init_model(cfg, str(folder / PRUNED_INIT))  # strict load
    assert type(rebuilt) is type(net)
    net.eval()
    with torch.no_grad():
        assert torch.allclose(rebuilt(data["inputs"][:1], mode="tensor"), net(data["inputs"][:1], mode="tensor"))
    assert json.loads((folder / "prune_report.json").read_text())["measure"] == "flops"


def test_unreachable_target_names_the_reachable_fraction(pruned):
    _, model, _, _, data, _ = pruned
    with pytest.raises(OarsError, match=r"--target-flops 0.01 is unreachable.*ask for at least 0\.\d+"):
        prune_to_target(model, data["inputs"][:1], PruneSettings(target_flops=0.01, max_layer_ratio=0.5))


def test_bad_targets_and_layers_are_named(pruned):
    _, model, _, _, data, _ = pruned
    with pytest.raises(OarsError, match="exactly one target"):
        prune_to_target(model, data["inputs"][:1], PruneSettings())
    with pytest.raises(OarsError, match=r"--target-params must be a fraction .* got 1.5"):
        prune_to_target(model, data["inputs"][:1], PruneSettings(target_params=1.5))
    with pytest.raises(OarsError, match="compress.scope.*none of these"):
        prune_to_target(model, data["inputs"][:1], PruneSettings(target_flops=0.5, scope=["trunk"]))
    with pytest.raises(OarsError, match=r"unknown option\(s\) \['critrion'\] for --method prune"):
        prune_settings({"method": "prune", "target_flops": 0.5, "critrion": "l2"}, "cfg.yaml")
    with pytest.raises(OarsError, match="compress.criterion must be one of"):
        prune_settings({"method": "prune", "criterion": "l3"})
    with pytest.raises(ValueError, match="'backbone.nope'"):
        apply_pruned_shapes(model, {"backbone.nope": {"attrs": {}, "tensors": {}}})


def test_table_keeps_one_row_per_variant_and_fills_the_report(tmp_path):
    (tmp_path / "report.html").write_text("<html><body><h1>r</h1>\n</body></html>\n")
    add_row(str(tmp_path), {"variant": "prune-a", "params": 10, "flops": 2e9, "metric": "mIoU", "metric_value": 0.5})
    add_row(str(tmp_path), {"variant": "original", "params": 20, "flops": 4e9, "metric": "mIoU", "metric_value": 0.6})
    rows = add_row(str(tmp_path), {"variant": "prune-a", "params": 9, "flops": 1.5e9})
    assert [r["variant"] for r in rows] == ["original", "prune-a"] and rows[1]["params"] == 9
    assert read_rows(str(tmp_path)) == rows
    md = (tmp_path / "compression.md").read_text()
    assert "| original | - | 20 | 4 |" in md and "| prune-a | - | 9 | 1.5 |" in md
    html = (tmp_path / "report.html").read_text()
    assert html.count("Compression variants") == 1 and html.index("Compression variants") < html.index("</body>")
    (tmp_path / "compression.json").write_text("[1, 2]")
    with pytest.raises(OarsError, match="not a compression table"):
        read_rows(str(tmp_path))


@pytest.mark.parametrize("config, shape, overrides", [
    ("detection/yolov3/yolov3_darknet53_demo_shapes.yaml", (1, 3, 64, 64), ["model.backbone.base_channels=4"]),
    ("video/tsm/tsm_r18_demo_videos.yaml", (1, 8, 3, 32, 32), ["model.backbone.base_channels=8"]),
])
def test_detector_and_recognizer_prune_and_rebuild_from_the_generated_model_config(config, shape, overrides):
    """YOLOv3 (backbone + neck, the three prediction convs kept) and TSM (the temporal shift traced through
    ``pruning_trace_forward``): pruned to 80% of the FLOPs, rebuilt by ``PrunedModel``, same outputs."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.compress.pruned_model import pruned_shapes
    from oars.tasks import activate

    cfg = load_config(os.path.join(ROOT, "configs", config), overrides)
    activate(cfg.default_scope)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
        x = torch.randn(*shape)
        net, report = prune_to_target(model, x, PruneSettings(target_flops=0.8))
        args = {k: v for k, v in cfg.model.items() if k != "type"}
        rebuilt = MODELS.build({"type": "PrunedModel", "pruned_from": cfg.model.type,
                                "pruned_shapes": pruned_shapes(model, net), **copy.deepcopy(args)})
    assert report.flops_after <= 0.8 * report.flops_before
    rebuilt.load_state_dict(net.state_dict(), strict=True)
    rebuilt.eval()
    with torch.no_grad():
        got, want = rebuilt(x, mode="tensor"), net(x, mode="tensor")
        full = model(x, mode="tensor")
    got, want, full = (list(v) if isinstance(v, (list, tuple)) else [v] for v in (got, want, full))
    assert [g.shape for g in got] == [f.shape for f in full]  # the heads' outputs keep their channels
    assert all(torch.allclose(g, w, atol=1e-5) for g, w in zip(got, want))


def test_prune_needs_exactly_one_target():
    from oars.compress.options import prune_settings

    with pytest.raises(OarsError, match="needs one target, --target-flops F or --target-params P .* got neither"):
        prune_settings({"method": "prune"}, "cfg.yaml")
    with pytest.raises(OarsError, match="got both"):
        prune_settings({"method": "prune", "target_flops": 0.5, "target_params": 0.5}, "cfg.yaml")
    assert prune_settings({"method": "prune", "target_params": "0.5"}).target_params == 0.5


def test_finetune_epochs_rescale_the_epoch_schedule_not_the_iteration_warmup():
    """--epochs 16 on the demo U-Net (cosine T_max 32 over 32 epochs, a 30-iteration warm-up): the cosine ends with
    the fine-tuning, the warm-up stays, a single mapping and milestones scale too, an unchanged length changes
    nothing."""
    from oars.pipelines.compress.prune import rescaled_schedule

    cfg = load_config(DEMO_CFG)
    extra = rescaled_schedule(cfg.param_scheduler, cfg.train_cfg.max_epochs, 16, by_epoch=True)
    assert extra == ["param_scheduler.1.begin=0", "param_scheduler.1.T_max=16"]
    tuned = load_config(DEMO_CFG, extra)
    assert tuned.param_scheduler[1]["T_max"] == 16 and tuned.param_scheduler[0]["end"] == 30
    step = {"type": "MultiStepLR", "milestones": [8, 11], "end": 12}
    assert rescaled_schedule(step, 12, 6, by_epoch=True) == ["param_scheduler.end=6",
                                                              "param_scheduler.milestones=[4, 6]"]
    assert rescaled_schedule(cfg.param_scheduler, 32, 32, by_epoch=True) == []
    assert rescaled_schedule([{"type": "LinearLR", "by_epoch": False, "end": 100}], 1000, 10, by_epoch=False) \
        == ["param_scheduler.0.end=1"]
