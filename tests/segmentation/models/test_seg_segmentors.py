"""EncoderDecoder built from the real base configs (shrunk): loss / predict / tensor modes and training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from mmengine.optim import OptimWrapper

from segmentation.registry import MODELS

MODEL_NAMES = ["unet", "deeplabv3_r50", "deeplabv3plus_r50"]


def build(cfg_factory, name: str, **changes):
    torch.manual_seed(0)
    cfg = cfg_factory(name)
    cfg.update(changes)
    return MODELS.build(cfg)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_loss_predict_tensor_modes(name, cfg_factory, batch_factory):
    model = build(cfg_factory, name)
    assert model.num_classes == 4
    data = model.data_preprocessor(batch_factory(), True)
    assert data["inputs"].shape == (2, 3, 64, 64)

    losses = model(**data, mode="loss")
    assert {"decode.loss_ce", "aux.loss_ce", "decode.acc_seg", "aux.acc_seg"} <= set(losses)
    total = losses["decode.loss_ce"] + losses["aux.loss_ce"]
    assert torch.isfinite(total)
    total.backward()
    assert all(p.grad is not None for p in model.decode_head.parameters() if p.requires_grad)

    model.eval()
    with torch.no_grad():
        logits = model(data["inputs"], mode="tensor")
        assert logits.shape == (2, 4, 64, 64)
        preds = model(**data, mode="predict")
    assert [tuple(p.pred_sem_seg.shape) for p in preds] == [(64, 64), (112, 96)]
    assert preds[1].seg_logits.data.shape == (4, 112, 96)
    assert preds[1].pred_sem_seg.data.dtype == torch.long
    # padding removed (56x48 of the 64x64 batch) then bilinear resize to ori_shape
    expected = F.interpolate(logits[1:2, :, :56, :48], size=(112, 96), mode="bilinear", align_corners=False)[0]
    torch.testing.assert_close(preds[1].seg_logits.data, expected)
    torch.testing.assert_close(preds[0].seg_logits.data, logits[0])
    assert torch.equal(preds[1].pred_sem_seg.data[0], expected.argmax(0))
    assert preds[1].metainfo["batch_input_shape"] == (64, 64)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_sgd_steps_reduce_loss(name, cfg_factory, batch_factory):
    model = build(cfg_factory, name)
    optim = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    batch = batch_factory(seed=1)
    history = [model.train_step(batch, optim)["loss"].item() for _ in range(20)]
    assert all(torch.isfinite(torch.tensor(history)))
    assert history[-1] < history[0] - 0.05, history


def test_predict_without_data_samples(cfg_factory, batch_factory):
    model = build(cfg_factory, "deeplabv3_r50").eval()
    batch = batch_factory(with_gt=False)
    batch["inputs"] = batch["inputs"][:1]
    batch["data_samples"] = None
    with torch.no_grad():
        data = model.data_preprocessor(batch, False)
        preds = model(**data, mode="predict")
    assert len(preds) == 1 and preds[0].pred_sem_seg.shape == (64, 64)
    # test_step: data samples without labels
    with torch.no_grad():
        preds = model.test_step(batch_factory(with_gt=False))
    assert [tuple(p.pred_sem_seg.shape) for p in preds] == [(64, 64), (112, 96)]


def test_flip_metainfo_is_undone(cfg_factory, batch_factory):
    model = build(cfg_factory, "unet").eval()
    batch = batch_factory(with_gt=False)
    flipped = batch_factory(with_gt=False)
    flipped["inputs"] = [img.flip(-1) for img in flipped["inputs"]]
    for s in flipped["data_samples"]:
        s.set_metainfo(dict(flip=True, flip_direction="horizontal"))
    with torch.no_grad():
        plain = model.test_step(batch)
        undone = model.test_step(flipped)
    # the U-Net is not flip-equivariant, so compare with the flipped-back logits of the flipped input
    data = model.data_preprocessor(flipped, False)
    with torch.no_grad():
        logits = model(data["inputs"], mode="tensor")
    expected = F.interpolate(logits[1:2, :, :56, :48].flip(-1), size=(112, 96), mode="bilinear")[0]
    torch.testing.assert_close(undone[1].seg_logits.data, expected)
    assert plain[1].seg_logits.shape == undone[1].seg_logits.shape


def test_auxiliary_head_list_prefixes(cfg_factory, batch_factory):
    cfg = cfg_factory("deeplabv3_r50")
    aux = cfg["auxiliary_head"]
    second = dict(
        aux,
        in_index=1,
        loss_decode=[dict(type="CrossEntropyLoss", loss_weight=0.2), dict(type="DiceLoss", loss_weight=0.2)],
    )
    cfg["auxiliary_head"] = [aux, second]
    model = MODELS.build(cfg)
    data = model.data_preprocessor(batch_factory(), True)
    losses = model(**data, mode="loss")
    assert {"decode.loss_ce", "aux0.loss_ce", "aux1.loss_ce", "aux1.loss_dice"} <= set(losses)
    assert model.auxiliary_head[1].in_channels == 32  # ResNet-18 width 16, stage index 1


def test_in_channels_inferred_and_config_wins(cfg_factory):
    model = build(cfg_factory, "deeplabv3plus_r50")
    assert model.feat_channels == [16, 32, 64, 128]
    assert model.decode_head.in_channels == [16, 128]
    assert model.auxiliary_head.in_channels == 64
    cfg = cfg_factory("deeplabv3_r50")
    cfg["decode_head"]["in_channels"] = 128
    assert MODELS.build(cfg).decode_head.in_channels == 128


def test_config_errors(cfg_factory):
    cfg = cfg_factory("deeplabv3_r50")
    cfg["decode_head"]["num_classes"] = 7
    with pytest.raises(ValueError, match="decode_head.num_classes=7 differs from model.num_classes=4"):
        MODELS.build(cfg)
    cfg = cfg_factory("deeplabv3_r50")
    cfg["test_cfg"] = dict(mode="slide", crop_size=[32, 32])
    with pytest.raises(ValueError, match="test_cfg.stride"):
        MODELS.build(cfg)
    cfg = cfg_factory("deeplabv3_r50")
    cfg["test_cfg"] = dict(mode="tiles")
    with pytest.raises(ValueError, match="test_cfg.mode"):
        MODELS.build(cfg)
    cfg = cfg_factory("deeplabv3_r50")
    cfg["decode_head"]["in_index"] = 4
    with pytest.raises(ValueError, match="in_index 4 is out of range for 4 input features"):
        MODELS.build(cfg)
    cfg = cfg_factory("unet")
    cfg["num_classes"] = 1
    with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
        MODELS.build(cfg)
    with pytest.raises(ValueError, match="mode must be 'loss', 'predict' or 'tensor'"):
        build(cfg_factory, "unet")(torch.zeros(1, 3, 32, 32), mode="train")


def test_loss_mode_needs_padded_labels(cfg_factory, batch_factory):
    model = build(cfg_factory, "unet")
    batch = batch_factory()
    inputs = torch.zeros(2, 3, 64, 64)
    with pytest.raises(ValueError, match="label map of sample 1 has shape"):
        model(inputs, batch["data_samples"], mode="loss")
