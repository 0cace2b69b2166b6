"""ACE2P's pieces: edge targets, the left/right label swap (flip augmentation and flip TTA), the edge loss, the
head's outputs, the full-size parameter count (a hand count of the authors' AugmentCE2P) and the shrunk configs
in loss / predict / tensor mode."""

from __future__ import annotations

import copy
import glob
import os

import config_checks_segmentation as seg_checks
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from demo_utils import ROOT
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData

from oars.config import load_config
from oars.errors import DataError
from segmentation.flip_pairs import check_flip_pairs, pair_permutation, swap_label_pairs
from segmentation.models.losses import EdgeCrossEntropyLoss, edge_class_weights
from segmentation.models.segmentors.tta import check_aug_cfg, tta_inference
from segmentation.registry import MODELS
from segmentation.structures import SegDataSample
from segmentation.transforms import PackSegInputs
from segmentation.transforms_parsing import GenerateEdge, RandomFlipParsing, label_edges

ACE2P_DIR = os.path.join(ROOT, "configs", "segmentation", "ace2p")
LIP_CFG = os.path.join(ACE2P_DIR, "ace2p_r101_473x473_lip.yaml")
CONFIGS = sorted(glob.glob(os.path.join(ACE2P_DIR, "*.yaml")))


# ---------------------------------------------------------------------------------------------- edge targets
def test_edges_of_a_vertical_boundary_by_schp_rule():
    """Left half 0, right half 1 (4x4). Marks: the horizontal pairs (x=1, x=2) mark x=1 in every row; the "\\"
    pairs (y, 1)-(y+1, 2) mark (y, 1); the "/" pairs (y, 2)-(y+1, 1) mark the upper pixel (y, 2) for y = 0..2."""
    label = np.array([[0, 0, 1, 1]] * 4, np.uint8)
    expected = np.array([[0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 0, 0]], np.uint8)
    np.testing.assert_array_equal(label_edges(label, edge_width=1), expected)
    # width 3 dilates every mark by one pixel in the 8-neighbourhood: columns 0..3 all become edge
    np.testing.assert_array_equal(label_edges(label, edge_width=3), np.ones((4, 4), np.uint8))
    # a uniform map has no edge
    assert label_edges(np.full((5, 5), 7, np.uint8)).max() == 0


def test_edges_leave_ignored_pixels_out():
    """A boundary between a class and ignore (255) is no edge, and ignored pixels carry 255."""
    label = np.array([[0, 0, 255, 255], [0, 0, 255, 255], [0, 0, 1, 1]], np.uint8)
    expected = np.array([[0, 0, 255, 255], [0, 1, 255, 255], [0, 1, 0, 0]], np.uint8)
    # valid pairs that differ: the horizontal (2, 1)-(2, 2), marked on its left pixel (2, 1), and the "\\" pair
    # (1, 1)-(2, 2), marked on its upper pixel (1, 1); every pair touching 255 (the vertical (1, 2)-(2, 2), the "/"
    # (1, 2)-(2, 1)) is no edge
    np.testing.assert_array_equal(label_edges(label, edge_width=1), expected)
    wide = label_edges(label, edge_width=3)
    assert (wide[label == 255] == 255).all() and wide[2, 0] == 1 and wide[2, 2] == 1 and wide[0, 0] == 1


@pytest.mark.parametrize("width", [0, 2, True, 3.0])
def test_edge_width_must_be_odd_positive_int(width):
    with pytest.raises(DataError, match="edge_width must be an odd int"):
        GenerateEdge(edge_width=width)


def test_generate_edge_is_packed_with_the_sample():
    seg = np.zeros((6, 8), np.uint8)
    seg[:, 4:] = 2
    results = GenerateEdge()({"gt_seg_map": seg, "ignore_index": 255, "img": np.zeros((6, 8, 3), np.uint8)})
    sample = PackSegInputs()(results)["data_samples"]
    assert sample.gt_edge_map.data.shape == (1, 6, 8) and sample.gt_edge_map.data.dtype == torch.uint8
    assert sample.gt_edge_map.data[0, :, 2:6].eq(1).all() and sample.gt_edge_map.data[0, :, :2].eq(0).all()
    with pytest.raises(KeyError, match="LoadSegAnnotations before it"):
        GenerateEdge()({"img": np.zeros((2, 2, 3), np.uint8)})


# -------------------------------------------------------------------------------------- left/right label swap
def test_flip_pairs_checks():
    assert check_flip_pairs([[14, 15], [16, 17]], "k", 20) == ((14, 15), (16, 17))
    assert check_flip_pairs(None, "k") == ()
    for bad, match in (([[1, 2, 3]], "pairs such as"), ([[3, 3]], "with itself"), ([[1, 2], [2, 3]], "more than one"),
                       ([[18, 20]], "num_classes=20"), ("14,15", "pairs such as"), ([[-1, 2]], "pairs such as")):
        with pytest.raises(ValueError, match=match):
            check_flip_pairs(bad, "test_cfg.aug.flip_label_pairs", 20)
    perm = pair_permutation([(1, 2)], 4)
    assert perm.tolist() == [0, 2, 1, 3]
    label = np.array([[0, 1, 2, 255]], np.uint8)
    assert swap_label_pairs(label, [(1, 2)]).tolist() == [[0, 2, 1, 255]]


def test_random_flip_parsing_swaps_left_and_right_labels():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    seg = np.array([[14, 0, 15], [16, 255, 19]], np.uint8)
    out = RandomFlipParsing(prob=1.0, flip_pairs=[[14, 15], [16, 17], [18, 19]])(
        {"img": img.copy(), "gt_seg_map": seg.copy(), "img_shape": (2, 3)})
    assert out["flip"] is True
    # mirrored, then left <-> right: the left arm (14) on the image's left is now a right arm (15) on its right
    assert out["gt_seg_map"].tolist() == [[14, 0, 15], [18, 255, 17]]
    np.testing.assert_array_equal(out["img"], img[:, ::-1])
    kept = RandomFlipParsing(prob=0.0, flip_pairs=[[14, 15]])({"img": img.copy(), "gt_seg_map": seg.copy()})
    assert kept["gt_seg_map"].tolist() == seg.tolist()
    with pytest.raises(DataError, match="RandomFlipParsing.flip_pairs"):
        RandomFlipParsing(flip_pairs=[[1, 1]])


def _equivariant_model(num_classes: int, pairs: list[tuple[int, int]]):
    """A random position-dependent 'parsing model' that is exactly flip-equivariant up to the label swap:
    infer(flip(x)) = swap(flip(infer(x))) -- what a model that learned left/right from the pose does."""
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(num_classes, 3, 3, 3, generator=g)
    pos = torch.randn(1, num_classes, 8, 8, generator=g) * 3

    def raw(x):
        return F.conv2d(x, weight, padding=1) + pos

    perm = torch.from_numpy(pair_permutation(pairs, num_classes))

    def infer(x):
        return raw(x) + raw(x.flip(3)).flip(3)[:, perm]

    return infer


def test_flip_tta_with_the_label_swap_gives_back_the_unflipped_prediction():
    pairs = [(1, 2), (3, 4)]
    infer = _equivariant_model(5, pairs)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    plain = infer(x).softmax(1)
    swapped = tta_inference(x, infer, [1.0], ["horizontal"], flip_label_pairs=pairs)
    torch.testing.assert_close(swapped, plain, rtol=1e-5, atol=1e-6)
    # without the swap the mirrored view votes the other side's class: the average moves away
    unswapped = tta_inference(x, infer, [1.0], ["horizontal"])
    assert (unswapped - plain).abs().max() > 0.1
    # a diagonal flip (a 180-degree rotation) keeps left and right: no swap applied to it
    assert check_aug_cfg({"flip": True, "flip_label_pairs": [[1, 2]]})["flip_label_pairs"] == ((1, 2),)
    assert "flip_label_pairs" not in check_aug_cfg({"flip": True})  # other models' aug unchanged
    with pytest.raises(ValueError, match="flip_label_pairs"):
        check_aug_cfg({"flip": True, "flip_label_pairs": [[1]]})


# ------------------------------------------------------------------------------------------------ edge loss
def test_edge_loss_weights_and_formula():
    target = torch.tensor([[[0, 0, 0, 1], [0, 0, 255, 1]]])  # 5 non-edge, 2 edge, 1 ignored
    torch.testing.assert_close(edge_class_weights(target), torch.tensor([2 / 7, 5 / 7]))
    logits = torch.randn(1, 2, 2, 4, generator=torch.Generator().manual_seed(0))
    expected = F.cross_entropy(logits, target, weight=torch.tensor([2 / 7, 5 / 7]), ignore_index=255)
    torch.testing.assert_close(EdgeCrossEntropyLoss()(logits, target), expected)
    # every valid pixel non-edge: weight 0 for it, loss 0 rather than NaN
    assert EdgeCrossEntropyLoss()(logits, torch.zeros_like(target)).item() == 0.0
    with pytest.raises(ValueError, match="0, 1 or ignore_index"):
        EdgeCrossEntropyLoss()(logits, torch.full_like(target, 3))
    with pytest.raises(ValueError, match="2-class edge logits"):
        EdgeCrossEntropyLoss()(torch.zeros(1, 3, 2, 4), target)


# --------------------------------------------------------------------------------------------------- model
def _shrunk(path: str = LIP_CFG, **overrides):
    cfg = load_config(path)
    model_cfg = seg_checks.shrink_model(cfg.model)
    model_cfg.update(overrides)
    with DefaultScope.overwrite_default_scope("segmentation"):
        return MODELS.build(copy.deepcopy(model_cfg)), cfg


def test_head_outputs_parsing_fusion_and_edge_at_a_quarter():
    torch.manual_seed(0)
    model, _ = _shrunk()
    model.eval()
    with torch.no_grad():
        feats = model.extract_feat(torch.randn(2, 3, 96, 64))
        parsing, fusion, edge = model.decode_head(feats)
    assert parsing.shape == (2, 20, 24, 16) and fusion.shape == (2, 20, 24, 16) and edge.shape == (2, 2, 24, 16)
    # predict / tensor mode / export: the fusion logits at the input size
    with torch.no_grad():
        assert model.encode_decode(torch.zeros(1, 3, 96, 64)).shape == (1, 20, 96, 64)


def test_full_size_parameter_count_is_augmentce2p_counted_by_hand():
    """ACE2P R101 on LIP (20 classes), every layer of networks/AugmentCE2P.py counted by hand.

    conv(a, b, k) = a*b*k*k (no bias), +BN = 2 per channel (InPlaceABN has the same weight and bias), fc(a, b) =
    a*b + b (1x1 conv with bias).
    Backbone:
      torchvision ResNet-101 trunk 42,500,160 (resnet101 44,549,160 less fc 2,049,000)
      - 7x7 stem conv(3, 64, 7)+BN 9,536
      + deep stem conv(3, 64, 3)+BN 1,856 + conv(64, 64, 3)+BN 36,992 + conv(64, 128, 3)+BN 73,984 = 112,832
      + layer1 fed 128 channels, not 64: its first block's conv(128, 64, 1) and shortcut conv(128, 256, 1) grow by
        64*64 + 64*256 = 20,480
      = 42,623,936
    Head:
      context: 4 x (conv(2048, 512, 1)+BN 1,049,600) 4,198,400 + bottleneck conv(4096, 512, 3)+BN 18,875,392
               = 23,073,792
      decoder: conv(512, 256, 1)+BN 131,584 + conv(256, 48, 1)+BN 12,384 + conv(304, 256, 1)+BN 78,336
               + conv(256, 256, 1)+BN 66,048 + fc(256, 20) 5,140 = 293,492
      edge:    conv(256, 256, 1)+BN 66,048 + conv(512, 256, 1)+BN 131,584 + conv(1024, 256, 1)+BN 262,656
               + shared 3x3 conv(256, 2, 3)+bias 4,610 + fc(6, 2) 14 = 464,912
      fusion:  conv(1024, 256, 1)+BN 262,656 + fc(256, 20) 5,140 = 267,796
      = 24,099,992
    Total 66,723,928. ATR's 18 classes: 2 classifiers x 2 x 257 = 1,028 fewer, 66,722,900.
    """
    backbone = 42_500_160 - 9_536 + (1_856 + 36_992 + 73_984) + (64 * 64 + 64 * 256)
    context = 4 * (2048 * 512 + 1024) + (4096 * 512 * 9 + 1024)
    decoder = (512 * 256 + 512) + (256 * 48 + 96) + (304 * 256 + 512) + (256 * 256 + 512) + (256 * 20 + 20)
    edge = (256 * 256 + 512) + (512 * 256 + 512) + (1024 * 256 + 512) + (256 * 2 * 9 + 2) + (6 * 2 + 2)
    fusion = (1024 * 256 + 512) + (256 * 20 + 20)
    assert (backbone, context, decoder, edge, fusion) == (42_623_936, 23_073_792, 293_492, 464_912, 267_796)
    expected = {"ace2p_r101_473x473_lip.yaml": backbone + context + decoder + edge + fusion,
                "ace2p_r101_473x473_cihp.yaml": 66_723_928, "ace2p_r101_512x512_atr.yaml": 66_723_928 - 2 * 2 * 257}
    assert expected["ace2p_r101_473x473_lip.yaml"] == 66_723_928
    for name, count in expected.items():
        cfg = load_config(os.path.join(ACE2P_DIR, name))
        with DefaultScope.overwrite_default_scope("segmentation"), torch.device("meta"):
            model = MODELS.build(copy.deepcopy(cfg.model))
        assert sum(p.numel() for p in model.parameters()) == count, name
    stem = [m for m in model.backbone.stem if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.stride) for c in stem] == [(3, 64, (2, 2)), (64, 64, (1, 1)),
                                                                         (64, 128, (1, 1))]
    assert model.backbone.out_strides == [4, 8, 16, 16]


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.basename(c) for c in CONFIGS])
def test_config_runs_shrunk_in_every_mode(path, tmp_path):
    """What tests/test_configs.py runs for each config: shrunk loss / predict / tensor modes and the pipelines."""
    model, cfg = _shrunk(path)
    seg_checks.run_all_modes(model, cfg.model.num_classes)
    seg_checks.run_pipelines(cfg, tmp_path)
    train = [s["type"] for s in cfg.train_dataloader.dataset.pipeline]
    assert train.index("GenerateEdge") == len(train) - 2 and "RandomFlipParsing" in train
    # the flip augmentation and the flip TTA swap the dataset's pairs
    pairs = cfg.train_dataloader.dataset.get("flip_pairs") or [[14, 15], [16, 17], [18, 19]]
    flip = next(s for s in cfg.train_dataloader.dataset.pipeline if s["type"] == "RandomFlipParsing")
    assert flip["flip_pairs"] == pairs
    aug = cfg.model.test_cfg.get("aug")
    assert aug is None or aug["flip_label_pairs"] == pairs


def _batch(with_edges: bool):
    g = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(2):
        s = SegDataSample(metainfo={"img_shape": (48, 40), "ori_shape": (48, 40)})
        seg = torch.randint(0, 20, (1, 48, 40), generator=g, dtype=torch.uint8)
        seg[:, :6] = 255
        s.gt_sem_seg = PixelData(data=seg)
        if with_edges:
            s.gt_edge_map = PixelData(data=torch.from_numpy(label_edges(seg[0].numpy()))[None])
        samples.append(s)
    g = torch.Generator().manual_seed(1)
    return {"inputs": [torch.randint(0, 256, (3, 48, 40), generator=g, dtype=torch.uint8) for _ in range(2)],
            "data_samples": samples}


def test_loss_takes_the_pipeline_edges_or_derives_the_same_ones():
    torch.manual_seed(0)
    model, _ = _shrunk(data_preprocessor={"type": "SegDataPreprocessor", "size_divisor": 32, "bgr_to_rgb": True})
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    model.eval()  # the same batch statistics for both runs
    losses = []
    for with_edges in (True, False):
        data = model.data_preprocessor(_batch(with_edges), training=True)
        assert data["inputs"].shape[-2:] == (64, 64)  # padded: the edge maps are padded with ignore too
        losses.append(model(**data, mode="loss"))
    assert set(losses[0]) == {"decode.parsing.loss_ce", "decode.parsing.loss_lovasz", "decode.fusion.loss_ce",
                              "decode.fusion.loss_lovasz", "decode.acc_seg", "decode.edge.loss_edge"}
    for key, value in losses[0].items():
        torch.testing.assert_close(value, losses[1][key], msg=key)


def test_tta_label_pairs_are_checked_against_the_classes():
    with pytest.raises(ValueError, match="num_classes=20"):
        _shrunk(test_cfg={"mode": "whole", "aug": {"flip": True, "flip_label_pairs": [[14, 15], [19, 20]]}})
    model, _ = _shrunk(test_cfg={"mode": "whole", "aug": {"scales": [1.0], "flip": True,
                                                           "flip_label_pairs": [[14, 15]]}})
    model.eval()
    with torch.no_grad():
        pred = model.predict(torch.randn(1, 3, 64, 64))
    assert pred[0].pred_sem_seg.data.shape == (1, 64, 64)
