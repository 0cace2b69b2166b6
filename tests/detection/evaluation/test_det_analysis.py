"""Error analysis on hand-built cases: confusion matrix with background, per-image errors, worst images,
PR curves; and gt_utils' way back to original pixels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mmengine.structures import InstanceData

from detection.evaluation import (
    class_pr_curves,
    confusion_matrix,
    gt_in_original,
    image_errors,
    pr_curves,
    to_original,
    worst_images,
)
from detection.structures import DetDataSample


def _gt(boxes, labels, ign=(), ign_labels=()):
    return {'bboxes': np.array(boxes, float).reshape(-1, 4), 'labels': np.array(labels, np.int64),
            'ignore_bboxes': np.array(ign, float).reshape(-1, 4), 'ignore_labels': np.array(ign_labels, np.int64)}


def _pred(boxes, scores, labels):
    return {'bboxes': np.array(boxes, float).reshape(-1, 4), 'scores': np.array(scores, float),
            'labels': np.array(labels, np.int64)}


# image 0: gt0 class 0 found; gt1 class 1 only found by a class-0 box (and a class-1 box under the score
# threshold); gt2 class 0 missed; one class-1 box on background
IMG0 = {'img_id': 0,
        'gt': _gt([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], [0, 1, 0]),
        'pred': _pred([[0, 0, 10, 10], [20, 20, 30, 30], [60, 60, 70, 70], [20, 20, 30, 30]],
                      [0.9, 0.8, 0.7, 0.1], [0, 0, 1, 1])}
# image 1: perfect
IMG1 = {'img_id': 1, 'gt': _gt([[5, 5, 15, 15]], [1]), 'pred': _pred([[5, 5, 15, 15]], [0.95], [1])}
# image 2: a box on an ignored (difficult / crowd) region is no error; one duplicate is
IMG2 = {'img_id': 2, 'gt': _gt([[0, 0, 20, 20]], [0], ign=[[50, 50, 60, 60]], ign_labels=[1]),
        'pred': _pred([[0, 0, 20, 20], [1, 1, 20, 20], [50, 50, 60, 60]], [0.9, 0.8, 0.6], [0, 0, 1])}


def test_confusion_matrix_background_row_and_column():
    cm = confusion_matrix([IMG0], num_classes=2, score_thr=0.3, iou_thr=0.5)
    assert cm.tolist() == [[1, 0, 1],   # gt 0: one found as class 0, one missed
                           [1, 0, 1],   # gt 1: confused with class 0, missed as class 1
                           [0, 1, 0]]   # background: one class-1 false positive
    # with no score threshold the weak class-1 box finds gt1
    cm = confusion_matrix([IMG0], num_classes=2, score_thr=0.0)
    assert cm.tolist() == [[1, 0, 1], [1, 1, 0], [0, 1, 0]]
    cm = confusion_matrix([IMG0, IMG1, IMG2], num_classes=2)
    # IMG2: both class-0 boxes overlap gt (mmdet counts every overlapping pair), nothing on background
    assert cm.tolist() == [[3, 0, 1], [1, 1, 1], [0, 1, 0]]


def test_image_errors_and_worst_images():
    errs = image_errors([IMG0, IMG1, IMG2], score_thr=0.3, iou_thr=0.5)
    assert [(e['missed'], e['false_positives']) for e in errs] == [(2, 2), (0, 0), (0, 1)]
    assert errs[0]['missed_mask'].tolist() == [False, True, True]
    assert errs[0]['fp_mask'].tolist() == [False, True, True, False]  # the 0.1 box is below the threshold
    assert errs[2]['fp_mask'].tolist() == [False, True, False]  # duplicate is false; ignored-region box is not
    assert worst_images(errs, 8) == [0, 2]  # error-free images are left out
    assert worst_images(errs, 1) == [0]


def test_class_pr_curves_reuse_ap():
    curves = class_pr_curves([IMG0, IMG1, IMG2], num_classes=2, iou_thr=0.5)
    same = pr_curves([IMG0, IMG1, IMG2], 2, (0.5,))[0]
    assert all(np.array_equal(a['precision'], b['precision']) for a, b in zip(curves, same))
    # class 0 in score order: 0.9 TP (IMG0), 0.9 TP (IMG2), 0.8 FP (IMG0, on gt1 of class 1), 0.8 FP (dup)
    c0 = curves[0]
    assert c0['num_gt'] == 3 and c0['num_dets'] == 4
    np.testing.assert_allclose(c0['recall'], [1 / 3, 2 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(c0['precision'], [1, 1, 2 / 3, 1 / 2])
    # class 1: 0.95 TP (IMG1), 0.7 FP, 0.6 on ignored (left out), 0.1 TP on gt1
    c1 = curves[1]
    np.testing.assert_allclose(c1['scores'], [0.95, 0.7, 0.1])
    np.testing.assert_allclose(c1['recall'], [0.5, 0.5, 1.0])
    np.testing.assert_allclose(c1['precision'], [1, 0.5, 2 / 3])


def test_gt_back_to_original_pixels():
    ds = DetDataSample(metainfo={'img_id': 3, 'ori_shape': (50, 100), 'img_shape': (100, 200),
                                 'scale_factor': (2.0, 2.0), 'flip': False})
    ds.gt_instances = InstanceData(bboxes=torch.tensor([[20.0, 10.0, 60.0, 50.0]]), labels=torch.tensor([1]))
    gt = gt_in_original(ds)
    np.testing.assert_allclose(gt['bboxes'], [[10, 5, 30, 25]])
    assert gt['ignore_bboxes'].shape == (0, 4) and gt['labels'].tolist() == [1]
    assert gt_in_original(ds.to_dict())['bboxes'].tolist() == gt['bboxes'].tolist()  # the Evaluator's dicts
    # a horizontally flipped 200-wide pipeline image: x -> 200 - x, then / 2
    meta = {'flip': True, 'flip_direction': 'horizontal', 'img_shape': (100, 200), 'scale_factor': (2.0, 2.0)}
    np.testing.assert_allclose(to_original(np.array([[140.0, 10.0, 180.0, 50.0]]), meta), [[10, 5, 30, 25]])
    with pytest.raises(KeyError, match='gt_instances'):
        gt_in_original(DetDataSample(metainfo={'img_id': 4}))
