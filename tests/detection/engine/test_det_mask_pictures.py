"""Instance masks in the evaluation pictures (--show-dir) and the report's worst-image panels: predicted and
ground-truth masks are filled in the class colour; the report keeps them as RLE until it draws."""

from __future__ import annotations

import numpy as np
import torch
from mmengine.structures import InstanceData

from detection.engine.prediction_pictures_hook import PredictionPicturesHook
from detection.engine.report_hook import error_panel
from detection.evaluation import image_errors, image_record
from detection.evaluation.gt_utils import sample_for_drawing
from detection.structures import DetDataSample
from oars_deploy.draw import get_palette
from oars_deploy.draw.layout import enlarge_factor
from oars_deploy.predictors.detection_boxes.draw import MIN_SIDE

CLASSES = ['circle', 'square']
PALETTE = get_palette(2, [[220, 20, 60], [0, 128, 0]])
H, W = 40, 60
F = enlarge_factor(H, W, MIN_SIDE)  # the pictures enlarge small images by this whole factor before drawing


def _sample(flip: bool = True) -> DetDataSample:
    gt_mask = np.zeros((H, W), np.uint8)
    gt_mask[10:30, 5:25] = 1
    pred_mask = np.zeros((H, W), bool)
    pred_mask[10:30, 35:55] = True  # a false positive on the right
    s = DetDataSample(metainfo={'img_id': 1, 'img_path': 'a.png', 'ori_shape': (H, W), 'img_shape': (2 * H, 2 * W),
                                'scale_factor': (2.0, 2.0), 'flip': flip, 'flip_direction': 'horizontal'})
    up = gt_mask.repeat(2, axis=0).repeat(2, axis=1)
    box = np.array([[5, 10, 25, 30]], np.float32) * 2
    if flip:
        up = up[:, ::-1]
        box = np.array([[2 * W - box[0, 2], box[0, 1], 2 * W - box[0, 0], box[0, 3]]], np.float32)
    s.gt_instances = InstanceData(bboxes=torch.from_numpy(box), labels=torch.tensor([1]),
                                  masks=torch.from_numpy(np.ascontiguousarray(up))[None])
    s.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.int64),
                                       masks=torch.zeros(0, 2 * H, 2 * W, dtype=torch.uint8))
    s.pred_instances = InstanceData(bboxes=torch.tensor([[35.0, 10, 55, 30]]), scores=torch.tensor([0.9]),
                                    labels=torch.tensor([0]), masks=torch.from_numpy(pred_mask)[None])
    return s


def _fill(row: np.ndarray, x: int, y: int, x0: int = 0) -> list[int]:
    return row[row.shape[0] - F * (H - y), x0 + F * x].tolist()  # picture pixel (x, y), below the caption bar


def test_masks_come_back_to_original_pixels_for_drawing():
    pred, gt = sample_for_drawing(_sample())
    assert pred['masks'].shape == (1, H, W) and pred['masks'].dtype == bool
    expected = np.zeros((H, W), np.uint8)
    expected[10:30, 5:25] = 1
    assert np.array_equal(gt['masks'][0], expected)  # unflipped and scaled back
    np.testing.assert_allclose(gt['bboxes'], [[5, 10, 25, 30]])


def test_show_dir_picture_fills_gt_and_predicted_masks():
    hook = PredictionPicturesHook(out_dir='unused')
    hook.classes, hook.palette = CLASSES, PALETTE
    img = np.full((H, W, 3), 100, np.uint8)
    row = hook.draw(img, _sample())
    grey = [100, 100, 100]
    green, crimson = [50, 114, 50], [80, 60, 160]  # 50/50 with (0, 128, 0) and (60, 20, 220) in BGR
    assert _fill(row, 15, 26) == green and _fill(row, 45, 26) == grey  # gt: the square's mask only
    pred_x0 = row.shape[1] - F * W  # the prediction panel is the last F * W columns
    assert _fill(row, 45, 26, pred_x0) == crimson and _fill(row, 15, 26, pred_x0) == grey


def test_report_keeps_rles_and_its_panel_draws_them():
    rec = image_record(_sample(flip=False), with_masks=True)
    assert isinstance(rec['pred']['mask_rles'][0]['counts'], str) and 'masks' not in rec['pred']
    assert len(rec['gt']['mask_rles']) == 1 and rec['gt']['ignore_mask_rles'] == []
    errors = image_errors([rec], score_thr=0.3, iou_thr=0.5)[0]
    img = np.full((H, W, 3), 100, np.uint8)
    panel = error_panel(img, rec, errors, CLASSES, PALETTE, score_thr=0.3)
    plain = error_panel(img, {**rec, 'pred': {k: v for k, v in rec['pred'].items() if k != 'mask_rles'},
                              'gt': {k: v for k, v in rec['gt'].items() if 'mask' not in k}},
                        errors, CLASSES, PALETTE, score_thr=0.3)
    assert panel.shape == plain.shape
    changed = (panel != plain).any(axis=2)
    assert changed.sum() > 0.1 * changed.size  # both 20x20 masks, scaled up to the 320-px panel, are filled
