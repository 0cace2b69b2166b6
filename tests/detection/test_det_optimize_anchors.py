"""Anchor fitting: k-means on 1 - IoU finds clear clusters, the genetic step never loses fitness, and
tools/optimize_anchors.py on the YOLOv3 demo config fits at least as well as the config's anchors."""

from __future__ import annotations

import os
import re
import runpy

import numpy as np
import pytest
from demo_utils import DET_DEMO_CFG, ROOT

from detection.anchors.boxes import Scaling
from detection.anchors.fit import anchor_fit, best_iou, evolve, fit_anchors, kmeans_iou, wh_iou
from detection.anchors.report import fit_config_anchors, split_masks
from oars.config import load_config
from oars.config.errors import ConfigError

CENTRES = np.array([[10.0, 10.0], [40.0, 20.0], [25.0, 80.0]])


def clustered_boxes(seed: int = 0, per_cluster: int = 200) -> np.ndarray:
    """Box sizes around :data:`CENTRES`, each side within +-8%: float [3 * per_cluster, 2]."""
    rng = np.random.default_rng(seed)
    return np.concatenate([c * rng.uniform(0.92, 1.08, (per_cluster, 2)) for c in CENTRES])


def test_wh_iou_of_boxes_aligned_at_the_origin():
    iou = wh_iou(np.array([[10.0, 10.0], [20.0, 5.0]]), np.array([[10.0, 10.0], [5.0, 20.0]]))
    np.testing.assert_allclose(iou, [[1.0, 50 / 150], [50 / 150, 25 / 175]])
    # several anchor sets at once give the same as one at a time
    sets = np.stack([CENTRES, CENTRES * 2])
    np.testing.assert_allclose(best_iou(clustered_boxes(), sets)[1], best_iou(clustered_boxes(), CENTRES * 2))


def test_kmeans_finds_three_clear_clusters():
    wh = clustered_boxes()
    centres = kmeans_iou(wh, 3, seed=1)
    np.testing.assert_allclose(centres, CENTRES[np.argsort(CENTRES.prod(1))], rtol=0.03)
    fitted = fit_anchors(wh, 3, iters=100, seed=1)
    np.testing.assert_allclose(fitted, CENTRES[np.argsort(CENTRES.prod(1))], rtol=0.08)
    assert anchor_fit(wh, fitted).mean_iou >= anchor_fit(wh, centres).mean_iou > 0.85
    assert anchor_fit(wh, fitted).bpr == 1.0


def test_evolution_never_loses_fitness_and_is_seeded():
    wh = clustered_boxes(seed=2)
    start = np.array([[12.0, 12.0], [30.0, 30.0], [60.0, 60.0]])
    evolved = evolve(wh, start, iters=60, seed=3)
    assert best_iou(wh, evolved).mean() > best_iou(wh, start).mean()
    np.testing.assert_array_equal(evolved, evolve(wh, start, iters=60, seed=3))
    # a start that is already optimal comes back unchanged (mutations are only kept when better)
    np.testing.assert_array_equal(fit_anchors(np.repeat(CENTRES, 5, 0), 3, iters=30), CENTRES[[0, 1, 2]])


def test_scaling_follows_resize():
    assert Scaling((128, 128), False, '').factors(256, 64) == (0.5, 2.0)
    assert Scaling((608, 608), True, '').factors(1216, 304) == (0.5, 0.5)
    assert Scaling(None, True, '').factors(100, 50) == (1.0, 1.0)
    assert split_masks(9, 3) == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert split_masks(7, 3) == [[5, 6], [3, 4], [0, 1, 2]]


def demo_overrides(data_root: str) -> list[str]:
    return [f'train_dataloader.dataset.data_root={data_root}']


def test_demo_config_fits_at_least_as_well_as_its_anchors(demo_data):
    found = fit_config_anchors(DET_DEMO_CFG, demo_overrides(demo_data), iters=300, seed=0)
    assert found.boxes.scaling.scale == (128, 128) and found.boxes.num_images == 16
    assert len(found.fitted) == len(found.current) == 7
    before, after = anchor_fit(found.boxes.wh, found.current), anchor_fit(found.boxes.wh, found.fitted)
    assert after.mean_iou >= before.mean_iou
    assert (found.fitted == np.round(found.fitted)).all() and (np.diff(found.fitted.prod(1)) >= 0).all()
    # --input-size doubles the boxes of these 128 px images
    double = fit_config_anchors(DET_DEMO_CFG, demo_overrides(demo_data), input_size=256, iters=0)
    np.testing.assert_allclose(double.boxes.wh, found.boxes.wh * 2)


def test_tool_prints_both_fits_and_a_line_that_pastes(demo_data, capsys):
    main = runpy.run_path(os.path.join(ROOT, 'tools/optimize_anchors.py'))['main']
    main(['-c', DET_DEMO_CFG, '-o', *demo_overrides(demo_data), '--iters', '200', '--num', '6'])
    out = capsys.readouterr().out
    assert re.search(r'config \(7 anchors\)\s+0\.\d{4}\s+\d\.\d{4}', out), out
    assert re.search(r'fitted \(6 anchors\)\s+0\.\d{4}\s+\d\.\d{4}', out), out
    anchors = re.search(r'-o (model\.bbox_head\.anchors="(\[\[.*\]\])")', out)
    masks = re.search(r'-o (model\.bbox_head\.anchor_masks="(\[\[.*\]\])")', out)
    assert anchors and masks, out
    cfg = load_config(DET_DEMO_CFG, [anchors.group(1).replace('"', ''), masks.group(1).replace('"', '')])
    assert len(cfg.model.bbox_head.anchors) == 6 and cfg.model.bbox_head.anchor_masks == [[4, 5], [2, 3], [0, 1]]


def test_a_config_without_anchors_needs_num():
    with pytest.raises(ConfigError, match='model.bbox_head.anchors is not set; pass --num N'):
        fit_config_anchors(DET_DEMO_CFG, ['model.bbox_head.anchors=null'])
