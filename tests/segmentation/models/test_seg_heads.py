"""Decode heads and the U-Net backbone: shapes, input selection, torchvision layout, errors."""

from __future__ import annotations

import pytest
import torch
from torchvision.models.segmentation.deeplabv3 import DeepLabHead
from torchvision.models.segmentation.fcn import FCNHead as TVFCNHead

from segmentation.models import ASPPHead, DeepLabV3PlusHead, FCNHead, UNet, convert_torchvision_deeplabv3
from segmentation.models.heads.decode_head import select_in_channels


def feats(channels=(8, 16, 32, 64), sizes=(16, 8, 8, 8)):
    return [torch.randn(2, c, s, s) for c, s in zip(channels, sizes)]


def test_select_in_channels():
    assert select_in_channels([8, 16, 32], -1, "H") == 32
    assert select_in_channels([8, 16, 32], [0, -1], "H") == [8, 32]
    assert select_in_channels(12, 2, "H") == 12
    with pytest.raises(ValueError, match="in_index 3 is out of range for 3 input features"):
        select_in_channels([8, 16, 32], 3, "H")
    with pytest.raises(ValueError, match="in_channels must be the list"):
        select_in_channels(12, [0, 1], "H")


def test_heads_output_shapes():
    f = feats()
    fcn = FCNHead(in_channels=[8, 16, 32, 64], num_classes=3, in_index=-2)
    assert fcn.channels == 8 and fcn(f).shape == (2, 3, 8, 8)
    fcn_cat = FCNHead(
        in_channels=[8, 16, 32, 64], channels=4, num_classes=3, num_convs=2, concat_input=True, in_index=0, dilation=2
    )
    assert fcn_cat(f).shape == (2, 3, 16, 16)
    assert FCNHead(in_channels=64, channels=64, num_convs=0, num_classes=3)(f).shape == (2, 3, 8, 8)
    aspp = ASPPHead(in_channels=[8, 16, 32, 64], channels=16, num_classes=3, in_index=3, dilations=(1, 2, 3))
    assert aspp(f).shape == (2, 3, 8, 8)
    plus = DeepLabV3PlusHead(in_channels=[8, 16, 32, 64], channels=16, c1_channels=4, num_classes=3)
    assert plus.in_channels == [8, 64]
    assert plus(f).shape == (2, 3, 16, 16)  # the low-level (stride-4) resolution
    assert plus.predict(f, (64, 64)).shape == (2, 3, 64, 64)
    # depthwise-separable atrous branches in the V3+ ASPP
    dw = plus.aspp.convs[1].depthwise.conv
    assert dw.groups == 64 and dw.dilation == (12, 12)


def test_torchvision_layout_of_aspp_and_fcn_heads():
    """torchvision's head state dicts, converted, have exactly our heads' keys and shapes (a 1:1 mapping)."""
    for ours, ref, tv_prefix, our_prefix in [
        (ASPPHead(in_channels=64, num_classes=3), DeepLabHead(64, 3), "classifier.", "decode_head."),
        (FCNHead(in_channels=64, num_classes=3), TVFCNHead(64, 3), "aux_classifier.", "auxiliary_head."),
    ]:
        converted = convert_torchvision_deeplabv3({tv_prefix + k: v for k, v in ref.state_dict().items()})
        expected = {our_prefix + k: v.shape for k, v in ours.state_dict().items()}
        assert {k: v.shape for k, v in converted.items()} == expected


def test_head_argument_errors():
    with pytest.raises(ValueError, match="FCNHead takes one input feature"):
        FCNHead(in_channels=[8, 16], num_classes=3, in_index=[0, 1])
    with pytest.raises(ValueError, match="channels \\(4\\) must equal the input channels \\(8\\)"):
        FCNHead(in_channels=8, channels=4, num_convs=0, num_classes=3)
    with pytest.raises(ValueError, match="needs in_index=\\(low_level, deepest\\)"):
        DeepLabV3PlusHead(in_channels=[8, 16], num_classes=3, in_index=1)


@pytest.mark.parametrize("upsample", ["deconv", "bilinear"])
def test_unet_outputs(upsample):
    net = UNet(base_channels=4, num_stages=4, upsample=upsample)
    outs = net(torch.randn(1, 3, 32, 24))
    assert net.out_channels == [32, 16, 8, 4] and net.out_strides == [8, 4, 2, 1]
    assert [tuple(o.shape[1:]) for o in outs] == [(32, 4, 3), (16, 8, 6), (8, 16, 12), (4, 32, 24)]
    default = UNet()
    assert default.out_channels == [1024, 512, 256, 128, 64] and default.divisor == 16


def test_unet_errors():
    with pytest.raises(ValueError, match=r"UNet input of shape \(1, 3, 40, 36\).*divisible by 16"):
        UNet(base_channels=2)(torch.zeros(1, 3, 40, 36))
    with pytest.raises(ValueError, match="upsample must be one of"):
        UNet(upsample="nearest")
