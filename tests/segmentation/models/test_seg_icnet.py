"""ICNet backbone + ICNeck: real-size parameter count against torchvision's ResNet-50 plus a hand count, the
ResNetV1c layout mmseg uses, branch strides, CFF fusion resolutions and arithmetic, and the 0.4-weighted
cascade-label-guidance losses of the config."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
import torchvision
from config_checks_segmentation import shrink_model

from segmentation.models.necks.ic_neck import CascadeFeatureFusion
from segmentation.registry import MODELS


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_full_size_matches_mmseg_icnet_r50(base_cfg_loader):
    """ICNet-R50-D8's backbone: ResNetV1c-50 (torchvision ResNet-50 without fc, its 7x7 stem replaced by three
    3x3 convs 3-32-32-64) + the ICNet layers counted by hand; 46.9M as mmseg's icnet_r50-d8 backbone."""
    cfg = base_cfg_loader("icnet_r50")
    with torch.device("meta"):  # shapes only: no memory, no initialisation time
        backbone = MODELS.build(copy.deepcopy(cfg["backbone"]))
        neck = MODELS.build(dict(cfg["neck"], in_channels=backbone.out_channels))
        tv = torchvision.models.resnet50()
    stem = (3 * 32 + 32 * 32 + 32 * 64) * 9 + 2 * (32 + 32 + 64)
    resnet = _params(tv) - _params(tv.fc) - _params(tv.conv1) - _params(tv.bn1) + stem
    assert _params(backbone.backbone) == resnet
    ppm = 4 * (2048 * 512 + 2 * 512)
    bottleneck = (2048 + 4 * 512) * 512 * 9 + 2 * 512
    sub1 = (3 * 32 + 32 * 32 + 32 * 64) * 9 + 2 * (32 + 32 + 64)
    sub2_sub4 = 2 * (512 * 256 + 2 * 256)
    assert _params(backbone) == resnet + ppm + bottleneck + sub1 + sub2_sub4 == 46_892_992
    assert backbone.out_channels == [64, 256, 256] and backbone.out_strides == [8, 16, 32]
    # cff_24: dilated 3x3 256->128 + 1x1 256->128; cff_12: dilated 3x3 128->128 + 1x1 64->128 (each + BN)
    assert _params(neck) == (256 * 9 + 256 + 128 * 9 + 64) * 128 + 4 * 2 * 128

    # the core ResNetV1c (its layout and mmseg names: tests/oars/models/test_backbones_resnet.py::test_v1c_variant),
    # with ICNet's ceil-mode max-pool and the contracted dilation of the d8 layout
    r = backbone.backbone
    assert r.variant == "c" and "stem.6.weight" in r.state_dict() and r.layer2[0].downsample[0].stride == (2, 2)
    assert r.maxpool.ceil_mode
    assert [b.conv2.dilation[0] for b in (r.layer3[0], r.layer3[1], r.layer4[0], r.layer4[1])] == [1, 2, 2, 4]
    assert all(b.conv2.stride == (1, 1) for b in (r.layer3[0], r.layer4[0]))


def test_branches_cff_and_cascade_losses(base_cfg_loader, batch_factory):
    torch.manual_seed(0)
    cfg = shrink_model(base_cfg_loader("icnet_r50"))
    cfg["num_classes"] = 4
    model = MODELS.build(cfg)
    assert model.feat_channels == [8, 8, 8] and model.backbone.out_channels == [8, 16, 16]
    model.eval()

    # 64x96 input. sub1: three stride-2 convs (ceil) -> 8x12. sub2: image/2 = 32x48 -> stem 16x24 -> ceil-mode
    # max-pool 9x13 -> layer2 5x7. sub4: layer2/2 = 2x3 (floor), dilated layer3/4 keep it.
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        sub1, sub2, sub4 = model.backbone(x)
        outs = model.neck([sub1, sub2, sub4])
    assert [tuple(t.shape) for t in (sub1, sub2, sub4)] == [(2, 8, 8, 12), (2, 16, 5, 7), (2, 16, 2, 3)]
    # CFF 24 upsamples sub4 to sub2's size, CFF 12 its fusion to sub1's size
    assert [tuple(t.shape) for t in outs] == [(2, 8, 5, 7), (2, 8, 8, 12), (2, 8, 8, 12)]

    # one CFF unit against hand-written ops: dilated 3x3 on the upsampled low map + 1x1 on the high one, ReLU
    cff = CascadeFeatureFusion(3, 2, 4).eval()
    low, high = torch.randn(1, 3, 3, 4), torch.randn(1, 2, 6, 8)
    with torch.no_grad():
        fused, up = cff(low, high)

        def conv_bn_relu(block, t, **kw):
            bn = block[1]
            t = F.conv2d(t, block[0].weight, **kw)
            return F.relu(F.batch_norm(t, bn.running_mean, bn.running_var, bn.weight, bn.bias, eps=bn.eps))

        ref_up = conv_bn_relu(cff.conv_low, F.interpolate(low, (6, 8), mode="bilinear"), padding=2, dilation=2)
        ref = F.relu(ref_up + conv_bn_relu(cff.conv_high, high))
    torch.testing.assert_close(up, ref_up)
    torch.testing.assert_close(fused, ref)

    # the decode head reads the fused 1/8 map; the auxiliary heads (cascade label guidance) the two side outputs,
    # each weighted 0.4
    model.train()
    data = model.data_preprocessor(batch_factory(), True)
    losses = model(**data, mode="loss")
    assert {"decode.loss_ce", "aux0.loss_ce", "aux1.loss_ce"} <= set(losses)
    feats = model.extract_feat(data["inputs"])
    gt = torch.stack([s.gt_sem_seg.data[0] for s in data["data_samples"]]).long()
    for i, head in enumerate(model.auxiliary_head):
        assert head.in_index == i
        head.eval()  # no dropout, so the loss can be recomputed from the same logits
        logits = head(feats)
        expected = 0.4 * F.cross_entropy(F.interpolate(logits, gt.shape[-2:], mode="bilinear"), gt, ignore_index=255)
        torch.testing.assert_close(head.loss(logits, gt)["loss_ce"], expected)
    assert model.decode_head.in_index == 2


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="out_indices must be"):
        MODELS.build(dict(type="ICNet", backbone_cfg=dict(depth=18, base_channels=8, out_indices=[3])))
    with pytest.raises(ValueError, match="out_channels must list 3"):
        MODELS.build(dict(type="ICNet", backbone_cfg=dict(depth=18, base_channels=8), out_channels=[8, 8]))
    neck = MODELS.build(dict(type="ICNeck", in_channels=[4, 4, 4], out_channels=4))
    with pytest.raises(ValueError, match="expected 3 feature maps"):
        neck([torch.zeros(1, 4, 4, 4)] * 2)


def test_pretrained_resnet_v1c_loads_when_training_starts(tmp_path):
    """``backbone_cfg.init`` is read by ``ICNet.init_weights`` (not at build time) and fits a ResNetV1c state dict
    (``stem.*``, ``layerN.0.downsample.{0,1}``: mmseg's ``resnet*_v1c`` names)."""
    small = dict(type="ICNet", backbone_cfg=dict(depth=18, base_channels=8, variant="c", output_stride=8),
                 light_branch_middle_channels=8, psp_out_channels=8, out_channels=[8, 8, 8])
    torch.manual_seed(0)
    source = MODELS.build(copy.deepcopy(small)).backbone.state_dict()
    assert "layer2.0.downsample.0.weight" in source and "stem.6.weight" in source
    path = tmp_path / "resnet18_v1c.pth"
    torch.save({"state_dict": source}, path)
    cfg = copy.deepcopy(small)
    cfg["backbone_cfg"]["init"] = {"checkpoint": str(path), "strict": True}
    torch.manual_seed(1)
    model = MODELS.build(cfg)
    assert not torch.equal(model.backbone.stem[0].weight, source["stem.0.weight"])
    model.init_weights()
    for key, value in model.backbone.state_dict().items():
        torch.testing.assert_close(value, source[key])
