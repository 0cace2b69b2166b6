"""SSD's parts on hand-computed cases: default boxes (and torchvision's DefaultBoxGenerator), hard negative mining,
matching with each gt's best prior forced, the losses, and the backbones' feature maps."""

from __future__ import annotations

import math

import pytest
import torch
from mmengine.structures import InstanceData
from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import box_iou

from detection.models.backbones import SSDVGG, SSDLiteMobileNetV3
from detection.models.heads import SSDHead
from detection.models.task_utils import SSDPriorGenerator, hard_negative_mask
from detection.structures import DetDataSample

SSD300_EXTRAS = [[256, 512, 3, 2, 1], [128, 256, 3, 2, 1], [128, 256, 3, 1, 0], [128, 256, 3, 1, 0]]


def test_default_boxes_hand_computed():
    # one 2x2 level of a 32x32 input, centres every 16 px; scales 0.25 (and 1.0 after): s' = 0.5; ratio 4: 0.5 x 0.125
    gen = SSDPriorGenerator(aspect_ratios=[[4]], scales=[0.25, 1.0], steps=[16])
    assert gen.num_base_priors == [4]
    priors = gen.grid_priors([(2, 2)], (32, 32))
    expected_first_cell = torch.tensor([
        [4.0, 4.0, 12.0, 12.0],  # 8 x 8 at (8, 8)
        [0.0, 0.0, 16.0, 16.0],  # 16 x 16
        [0.0, 6.0, 16.0, 10.0],  # w = 0.25 * 2 * 32 = 16, h = 0.25 / 2 * 32 = 4
        [6.0, 0.0, 10.0, 16.0],  # transposed
    ])
    assert priors.shape == (16, 4)
    torch.testing.assert_close(priors[:4], expected_first_cell)
    right, down = torch.tensor([16.0, 0.0, 16.0, 0.0]), torch.tensor([0.0, 16.0, 0.0, 16.0])
    torch.testing.assert_close(priors[4:8], expected_first_cell + right)  # (row 0, col 1)
    torch.testing.assert_close(priors[8:12], expected_first_cell + down)  # (row 1, col 0)
    # clip: a relative side above 1 is cut to the input (s' = sqrt(0.5 * 4) > 1)
    clipped = SSDPriorGenerator(aspect_ratios=[[]], scales=[0.5, 4.0], steps=[32]).grid_priors([(1, 1)], (32, 32))
    torch.testing.assert_close(clipped, torch.tensor([[8.0, 8.0, 24.0, 24.0], [0.0, 0.0, 32.0, 32.0]]))
    assert math.isclose(SSDPriorGenerator([[2]] * 3, min_ratio=0.2, max_ratio=0.8).scales[1], 0.5)


@pytest.mark.parametrize("kwargs, sizes, image", [
    (dict(aspect_ratios=[[2], [2, 3], [2, 3], [2, 3], [2], [2]], scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
          steps=[8, 16, 32, 64, 100, 300]), [(38, 38), (19, 19), (10, 10), (5, 5), (3, 3), (1, 1)], (300, 300)),
    (dict(aspect_ratios=[[2, 3]] * 6, min_ratio=0.2, max_ratio=0.95), [(20, 20), (10, 10), (5, 5), (3, 3), (2, 2),
                                                                        (1, 1)], (320, 320)),
    (dict(aspect_ratios=[[2], [3]], min_ratio=0.3, max_ratio=0.6, clip=False), [(3, 5), (2, 3)], (48, 80)),
])
def test_default_boxes_equal_torchvision(kwargs, sizes, image):
    ours = SSDPriorGenerator(**kwargs).grid_priors(sizes, image)
    tv = DefaultBoxGenerator(**kwargs)
    images = ImageList(torch.zeros(1, 3, *image), [image])
    assert torch.equal(ours, tv(images, [torch.zeros(1, 1, h, w) for h, w in sizes])[0])


def test_hard_negative_mining_hand_computed():
    loss = torch.tensor([[0.1, 0.9, 0.5, 0.3, 0.8, 0.2],
                         [0.7, 0.1, 0.2, 0.3, 0.4, 0.6],
                         [0.3, 0.2, 0.9, 0.1, 0.5, 0.4]])
    positive = torch.tensor([[1, 0, 0, 0, 0, 0],   # 1 positive -> the 3 hardest negatives: 0.9, 0.8, 0.5
                             [0, 0, 0, 0, 0, 0],   # no positive -> no negative
                             [1, 1, 0, 0, 0, 0]], dtype=torch.bool)  # 6 wanted, 3 available (one ignored)
    negative = ~positive
    negative[2, 5] = False  # ignored: never a negative, however hard
    mask = hard_negative_mask(loss, positive, negative, 3.0)
    assert mask.tolist() == [[False, True, True, False, True, False],
                             [False] * 6,
                             [False, False, True, True, True, False]]
    half = hard_negative_mask(loss[:1], positive[:1], negative[:1], 1.5)  # floor(1.5) = 1
    assert half.tolist() == [[False, True, False, False, False, False]]


def _head(**test_cfg) -> SSDHead:
    cfg = dict(score_thr=0.01, topk_candidates=400, nms_pre=-1, nms=dict(iou_threshold=0.45), max_per_img=200)
    cfg.update(test_cfg)
    return SSDHead(
        num_classes=3, in_channels=[4],
        prior_generator=dict(type="SSDPriorGenerator", aspect_ratios=[[2]], scales=[0.25, 0.5], steps=[8]),
        bbox_coder=dict(type="DeltaXYWHBBoxCoder", target_stds=[0.1, 0.1, 0.2, 0.2]),
        loss_bbox=dict(type="SmoothL1Loss", beta=1.0),
        train_cfg=dict(assigner=dict(type="MaxIoUAssigner", pos_iou_thr=0.5, neg_iou_thr=0.5, min_pos_iou=0.0,
                                     gt_max_assign_all=False), neg_pos_ratio=3),
        test_cfg=cfg)


def test_matching_forces_each_gts_best_prior_and_losses():
    head = _head()
    priors = head.priors([(4, 4)], (32, 32), torch.device("cpu"))  # 64 priors: 4 per cell of a 4x4 grid
    sample = DetDataSample(metainfo=dict(batch_input_shape=(32, 32), img_shape=(32, 32)))
    # gt 0 is prior 0 exactly; gt 1 (a sliver) overlaps every prior by < 0.5 and still gets its best prior
    sample.gt_instances = InstanceData(bboxes=torch.stack([priors[0], torch.tensor([20.0, 20.0, 21.0, 30.0])]),
                                       labels=torch.tensor([2, 1]))
    empty = DetDataSample(metainfo=dict(batch_input_shape=(32, 32), img_shape=(32, 32)))
    empty.gt_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long))
    labels, boxes, positive = head.get_targets(priors, [sample, empty])
    gt0 = box_iou(priors, sample.gt_instances.bboxes[:1])[:, 0] >= 0.5  # prior 0 and its wide / tall neighbours
    forced = int(box_iou(priors, sample.gt_instances.bboxes[1:])[:, 0].argmax())
    assert positive[0].tolist() == (gt0 | (torch.arange(64) == forced)).tolist() and not positive[1].any()
    assert labels[0, gt0].eq(2).all() and labels[0, forced] == 1 and (labels[1] == 3).all()  # background = 3
    assert torch.equal(boxes[0, forced], sample.gt_instances.bboxes[1])
    # zero outputs: a uniform softmax, CE log 4 for each of the P positives and the 3P hard negatives, all / P
    raw = (torch.zeros(2, 4 * 4, 4, 4), torch.zeros(2, 4 * 4, 4, 4))
    losses = head.loss_by_feat(raw, [sample, empty])
    torch.testing.assert_close(losses["loss_cls"], torch.tensor(4 * math.log(4)))
    targets = head.bbox_coder.encode(priors[positive[0]], boxes[0, positive[0]])
    expected = torch.nn.functional.smooth_l1_loss(torch.zeros_like(targets), targets, reduction="sum")
    torch.testing.assert_close(losses["loss_bbox"], expected / int(positive.sum()))


def test_export_decode_keeps_the_per_class_top_k_above_the_threshold():
    head = _head(score_thr=0.3, topk_candidates=2)
    logits = torch.zeros(1, 16, 4, 4)  # [A=4 x (3 + 1), H, W]: 0.25 everywhere, below score_thr, ...
    logits[0, 0, 0, :3] = torch.tensor([3.0, 2.0, 1.0])  # class 0, anchor 0, cells (0,0)..(0,2): .87 .71 .48
    boxes, scores = head.export_decode((logits, torch.zeros(1, 16, 4, 4)), (32, 32))
    assert boxes.shape == (1, 64, 4) and scores.shape == (1, 64, 3)
    kept = scores[0].nonzero().tolist()
    assert kept == [[0, 0], [4, 0]]  # cells (0,0) and (0,1): the 2 best of class 0; class 1/2 never above 0.3
    assert boxes.min() >= 0 and boxes.max() <= 32


def test_backbones_give_ssd_feature_maps():
    vgg = SSDVGG(SSD300_EXTRAS, widen_factor=0.125)
    sizes = [tuple(f.shape[-2:]) for f in vgg(torch.zeros(1, 3, 300, 300))]
    assert sizes == [(38, 38), (19, 19), (10, 10), (5, 5), (3, 3), (1, 1)]
    assert vgg.out_channels == [64, 128, 64, 32, 32, 32]
    # SSD512 as MMDetection's SSDNeck: five extra blocks, the last a 4x4 conv (torchvision's highres: 3x3 valid
    # convs then the 4x4: [[...], [128, 256, 3, 1, 0], [128, 256, 3, 1, 0], [128, 256, 4, 1, 0]] -> 6, 4, 1)
    ssd512 = SSDVGG([[256, 512, 3, 2, 1], [128, 256, 3, 2, 1], [128, 256, 3, 2, 1], [128, 256, 3, 2, 1],
                     [128, 256, 4, 1, 1]], widen_factor=0.125)
    sizes = [tuple(f.shape[-2:]) for f in ssd512(torch.zeros(1, 3, 512, 512))]
    assert sizes == [(64, 64), (32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    lite = SSDLiteMobileNetV3(widen_factor=0.25).eval()
    feats = lite(torch.zeros(1, 3, 320, 320))
    assert [tuple(f.shape[-2:]) for f in feats] == [(20, 20), (10, 10), (5, 5), (3, 3), (2, 2), (1, 1)]
    assert [f.shape[1] for f in feats] == lite.out_channels
    with pytest.raises(ValueError, match="extra_settings"):
        SSDVGG([[256, 512, 3]])
