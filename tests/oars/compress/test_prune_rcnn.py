"""Pruning R-CNNs with the default scope [backbone, neck]: the FPN is pruned inside (its lateral convs, coupled across
levels by the top-down additions, and the output convs' inputs) while its output convs, which feed the RPN and RoI
pooling, keep their width. Shrunk Faster R-CNN R18-FPN, Mask R-CNN (the demo config) and Cascade R-CNN with random
weights, on 64-px images: the FLOPs target is met, loss/predict/tensor modes run, the generated config rebuilds the
pruned shapes and loads the pruned checkpoint strictly (same outputs); FrozenBN (the Faster / Cascade R-CNN presets')
is sliced with its convolution, and a layer torch-pruning cannot slice is named.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch
from config_checks_detection import _batch
from demo_utils import MASK_DEMO_CFG, ROOT, random_checkpoint
from torch import nn

from oars.compress.measure import count_flops
from oars.compress.prune import PruneSettings, prune_to_target
from oars.config import load_config
from oars.errors import OarsError
from oars.pipelines.compress.prune import PRUNED_CONFIG, PRUNED_INIT, write_pruned

FASTER_CFG = os.path.join(ROOT, "configs/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml")
CASCADE_CFG = os.path.join(ROOT, "configs/detection/cascade_rcnn/cascade_rcnn_r50_fpn_1x_coco.yaml")
_NARROW = {  # ResNet-18 at 1/8 width (the preset's FrozenBN, stem + stage 1 frozen), a 16-channel FPN, narrow
    # RoI heads, few RoIs
    "model.num_classes": 3, "model.backbone.depth": 18, "model.backbone.base_channels": 8,
    "model.neck.out_channels": 16,
    "model.roi_head.bbox_roi_extractor.out_channels": 16, "model.roi_head.bbox_head.fc_out_channels": 32,
    "model.test_cfg.rpn.max_per_img": 10, "model.train_cfg.rpn_proposal.max_per_img": 20,
    "model.train_cfg.rcnn.sampler.num": 16,
}
_MASK = {  # the demo's own BN backbone, nothing frozen; a one-conv mask head on 5 RoIs
    "model.backbone.norm": "BN", "model.backbone.frozen_stages": -1,
    "model.roi_head.mask_roi_extractor.out_channels": 16,
    "model.roi_head.mask_head.num_convs": 1, "model.roi_head.mask_head.conv_out_channels": 16,
    "model.test_cfg.rpn.max_per_img": 5,
}
_CASCADE = {  # three stages: a head and a training sampler each
    **{k: v for k, v in _NARROW.items() if not k.startswith(("model.roi_head.bbox_head", "model.train_cfg.rcnn"))},
    **{f"model.roi_head.bbox_head.{i}.fc_out_channels": 32 for i in range(3)},
    **{f"model.train_cfg.rcnn.{i}.sampler.num": 16 for i in range(3)},
}
CASES = {  # config, overrides, FLOPs target (at 64 px the RoI heads, kept whole, hold much of the rest)
    "faster_rcnn": (FASTER_CFG, _NARROW, 0.7),
    "mask_rcnn": (MASK_DEMO_CFG, {**_NARROW, **_MASK}, 0.8),
    "cascade_rcnn": (CASCADE_CFG, _CASCADE, 0.75),
}


def _overrides(values: dict) -> list[str]:
    return [f"{k}={v}" for k, v in values.items()]


@pytest.fixture(scope="module", params=list(CASES))
def pruned(request, tmp_path_factory):
    """The shrunk detector (random weights) pruned to its target with the default scope, written as
    tools/compress.py writes it (generated config + pruned weights)."""
    from oars.pipelines.model import init_model

    torch.set_num_threads(1)
    config, values, target = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    overrides = _overrides(values)
    ckpt = random_checkpoint(config, overrides, folder)
    cfg = load_config(config, overrides)
    model = init_model(cfg, ckpt)
    with torch.no_grad():
        data = model.data_preprocessor(_batch(3), True)
    net, report = prune_to_target(model, data["inputs"][:1], PruneSettings(target_flops=target))
    write_pruned(cfg, model, net, report, ckpt, str(folder / "variant"))
    return model, net, report, data, target, folder / "variant"


def test_default_scope_meets_the_target_and_keeps_the_heads_input_widths(pruned):
    model, net, report, data, target, _ = pruned
    x = data["inputs"][:1]
    assert count_flops(net, x) <= target * count_flops(model, x) and report.params_after < report.params_before
    assert net.backbone.layer2[0].conv1.out_channels < model.backbone.layer2[0].conv1.out_channels
    norm = net.backbone.layer2[0].bn1  # FrozenBN (Faster R-CNN preset) or BN: sliced with its convolution
    assert norm.weight.shape[0] == norm.running_var.shape[0] == net.backbone.layer2[0].conv1.out_channels
    for new, old in zip(net.neck.inner_blocks, model.neck.inner_blocks):  # the laterals are pruned, all alike
        assert new[0].out_channels == net.neck.inner_blocks[0][0].out_channels < old[0].out_channels
    for new, old in zip(net.neck.layer_blocks, model.neck.layer_blocks):
        assert new[0].in_channels == net.neck.inner_blocks[0][0].out_channels  # inputs follow the laterals
        assert new[0].out_channels == old[0].out_channels  # outputs kept: the RPN and RoI pooling read them
    assert {p for p, why in report.unprunable.items() if "RoI pooling" in why} == \
        {f"neck.layer_blocks.{i}.0" for i in range(len(net.neck.layer_blocks))}
    assert net.rpn_head.conv[0][0].weight.shape == model.rpn_head.conv[0][0].weight.shape
    roi, roi0 = net.roi_head, model.roi_head
    heads, heads0 = ([r.bbox_head] if isinstance(r.bbox_head, nn.Module) and not isinstance(r.bbox_head, nn.ModuleList)
                     else list(r.bbox_head) for r in (roi, roi0))  # Cascade R-CNN: one head per stage
    assert [h.shared_fcs[0].weight.shape for h in heads] == [h.shared_fcs[0].weight.shape for h in heads0]
    if roi0.with_mask:
        assert roi.mask_head.convs[0][0].weight.shape == roi0.mask_head.convs[0][0].weight.shape


def test_pruned_detector_runs_in_loss_predict_and_tensor_modes(pruned):
    model, net, _, data, _, _ = pruned
    trained = copy.deepcopy(net).train()  # the fixture's net stays as saved (BN statistics)
    losses = trained(data["inputs"], data["data_samples"], mode="loss")
    total, _ = trained.parse_losses(losses)
    assert torch.isfinite(total)
    total.backward()
    assert trained.neck.inner_blocks[0][0].weight.grad is not None
    net.eval()
    with torch.no_grad():
        preds = net(data["inputs"], copy.deepcopy(data["data_samples"]), mode="predict")
        out, full = net(data["inputs"][:1], mode="tensor"), model(data["inputs"][:1], mode="tensor")
    assert len(preds) == len(data["data_samples"]) and all("pred_instances" in p for p in preds)
    rpn, rpn0 = ([t.shape for level in outs[:2] for t in level] for outs in (out, full))  # scores, deltas
    assert rpn == rpn0 and len(rpn) == 2 * len(net.neck.out_channels)


def test_generated_config_rebuilds_the_pruned_detector_and_loads_it_strictly(pruned):
    from oars.pipelines.model import init_model

    model, net, _, data, _, folder = pruned
    cfg = load_config(str(folder / PRUNED_CONFIG))
    assert cfg.model.type == "PrunedModel" and cfg.model.pruned_from == type(model).__name__
    assert any(path.startswith("neck.inner_blocks") for path in cfg.model.pruned_shapes)
    assert not any(path.startswith(("neck.layer_blocks.0.0", "rpn_head", "roi_head")) and
                   "out_channels" in entry["attrs"] for path, entry in cfg.model.pruned_shapes.items())
    rebuilt = init_model(cfg, str(folder / PRUNED_INIT))  # strict load
    assert type(rebuilt) is type(net)
    net.eval()
    with torch.no_grad():
        got, want = rebuilt(data["inputs"][:1], mode="tensor"), net(data["inputs"][:1], mode="tensor")
    flat = [(g, w) for g, w in zip(got, want) for g, w in (zip(g, w) if isinstance(g, (list, tuple)) else [(g, w)])]
    assert len(got) == len(want) and all(torch.allclose(g, w, atol=1e-5) for g, w in flat)


def test_a_layer_torch_pruning_cannot_slice_is_named():
    """A layer type torch-pruning has no rule for whose weights are buffers (its generic rule would leave them at
    the old width) is refused by path and type before any tracing."""

    class Scale(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.register_buffer("scale", torch.ones(channels, 1, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    model = nn.Module()
    model.backbone = nn.Sequential(nn.Conv2d(3, 8, 3), Scale(8), nn.Conv2d(8, 4, 1))
    with pytest.raises(OarsError, match=r"cannot be pruned .*backbone\.1 \(Scale\)"):
        prune_to_target(model, torch.zeros(1, 3, 8, 8), PruneSettings(target_flops=0.7))
