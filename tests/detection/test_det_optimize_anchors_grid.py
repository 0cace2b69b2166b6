"""tools/optimize_anchors.py on scales x ratios anchors (RetinaNet's AnchorGenerator, SSD's SSDPriorGenerator):
the one-dimensional fits recover hand-checkable ratios and octave positions, the fit on a config never scores
below the config's anchors, the printed -o line builds a model whose anchors have the fitted ratios, and anchor
kinds that are not fitted are refused with a message naming those that are."""

from __future__ import annotations

import json
import os
import re
import runpy

import numpy as np
import pytest
import torch
from demo_utils import ROOT
from mmengine.registry import DefaultScope

from detection.anchors.boxes import Scaling, training_scaling
from detection.anchors.grid_fit import fit_octave_scales, fit_paired_ratios, fit_ratios, kmeans_1d, octave_positions
from detection.anchors.grid_report import build_generator, find_grid_anchors, fit_grid_anchors, override_line
from detection.anchors.report import optimize_config_anchors
from oars.config import load_config
from oars.config.errors import ConfigError

RETINA_CFG = os.path.join(ROOT, 'configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml')
SSD_CFG = os.path.join(ROOT, 'configs/detection/ssd/ssd300_vgg16_coco.yaml')
FCOS_CFG = os.path.join(ROOT, 'configs/detection/fcos/fcos_r50_fpn_1x_coco.yaml')
KNOWN_RATIOS = np.array([1 / 3, 1.0, 3.0])  # h / w of the synthetic boxes


def known_ratio_boxes(n: int, seed: int = 0, lo: float = 24.0, hi: float = 150.0) -> np.ndarray:
    """float [n, 2] (w, h): h / w one of :data:`KNOWN_RATIOS` times exp(N(0, 0.03)), sizes sqrt(w h) log-uniform
    in [lo, hi]."""
    rng = np.random.default_rng(seed)
    ratio = KNOWN_RATIOS[rng.integers(0, 3, n)] * np.exp(rng.normal(0.0, 0.03, n))
    size = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return np.stack([size / np.sqrt(ratio), size * np.sqrt(ratio)], 1)


def test_one_dimensional_kmeans_hand_checked():
    values = np.array([0.0, 0.1, 1.0, 1.1, 2.0, 2.1])
    np.testing.assert_allclose(kmeans_1d(values, 3), [0.05, 1.05, 2.05])
    # a pinned centre takes its neighbours and never moves: the two free centres serve the rest
    np.testing.assert_allclose(kmeans_1d(values, 2, fixed=(0.0,)), [1.05, 2.05])


def test_ratio_fits_recover_the_known_ratios():
    wh = known_ratio_boxes(600)
    np.testing.assert_allclose(fit_ratios(wh, 3), KNOWN_RATIOS, rtol=0.01)
    # SSD pairs every ratio r with 1 / r beside the squares: one ratio per level is 3
    np.testing.assert_allclose(fit_paired_ratios(wh, 1), [3.0], rtol=0.01)


def test_octave_positions_hand_checked():
    refs = np.array([32.0, 64.0])
    level, pos = octave_positions(np.array([32.0, 32 * 2 ** 0.5, 90.5, 16.0, 512.0]), refs)
    np.testing.assert_array_equal(level, [0, 0, 1, 0, 1])
    np.testing.assert_allclose(pos, [0.0, 0.5, np.log2(90.5 / 64), 0.0, 1.0])  # outside the levels: clipped
    # sizes at a quarter and three quarters of the octave on both levels -> those two positions
    sizes = np.array([32 * 2 ** 0.25, 32 * 2 ** 0.75, 64 * 2 ** 0.25, 64 * 2 ** 0.75])
    wh = np.stack([sizes, sizes], 1)
    np.testing.assert_allclose(fit_octave_scales(wh, refs, 2), [0.25, 0.75])


@pytest.fixture(scope='module')
def coco_known_ratios(tmp_path_factory) -> list[str]:
    """A COCO-format train set of 8 square 400 px images with boxes of :data:`KNOWN_RATIOS` (image files exist but
    are empty: only the annotations are read), and the overrides that point a COCO config at it."""
    root = tmp_path_factory.mktemp('known_ratios')
    os.makedirs(root / 'img')
    wh = known_ratio_boxes(240, seed=1)
    images = [dict(id=i + 1, file_name=f'{i}.jpg', width=400, height=400) for i in range(8)]
    anns = [dict(id=j + 1, image_id=j % 8 + 1, category_id=1, bbox=[5.0, 5.0, float(w), float(h)],
                 area=float(w * h), iscrowd=0) for j, (w, h) in enumerate(wh)]
    for image in images:
        (root / 'img' / image['file_name']).touch()
    (root / 'ann.json').write_text(json.dumps(dict(images=images, annotations=anns,
                                                   categories=[dict(id=1, name='thing')])))
    return [f'train_dataloader.dataset.data_root={root}', 'train_dataloader.dataset.ann_file=ann.json',
            'train_dataloader.dataset.data_prefix.img=img', 'train_dataloader.dataset.classes=[thing]']


def test_retinanet_fit_recovers_ratios_and_beats_the_config(coco_known_ratios):
    cfg = load_config(RETINA_CFG, coco_known_ratios)
    anchors = find_grid_anchors(cfg.model.to_dict(), RETINA_CFG)
    assert anchors.key == 'model.bbox_head.anchor_generator' and anchors.pos_iou_thr == 0.5
    result = fit_grid_anchors(cfg, RETINA_CFG, anchors)
    assert result.boxes.scaling.scale == (1333, 800)  # 400 px images -> x2 (short side 800)
    names = [name for name, _, _ in result.rows]
    assert names == ['config', 'fitted ratios', 'fitted scales', 'fitted ratios + scales']
    np.testing.assert_allclose(result.rows[1][1]['ratios'], KNOWN_RATIOS, rtol=0.02)
    scales = result.rows[2][1]
    assert len(scales['scales']) == 3 and scales['octave_base_scale'] is None and scales['scales_per_octave'] is None
    config_fit, best_fit = result.rows[0][2], result.rows[result.best][2]
    assert result.best != 0 and best_fit.mean_iou > config_fit.mean_iou and best_fit.bpr >= config_fit.bpr
    # the -o items of ratios + scales (octave keys set to null) load and build the fitted generator
    line = override_line(anchors.key, result.rows[3][1])
    assert line.startswith('-o ') and 'octave_base_scale=null' in line
    generator = build_generator(load_config(RETINA_CFG, line.split()[1:]).model.bbox_head.anchor_generator.to_dict(),
                                anchors.key)
    assert generator.scales == scales['scales'] and generator.ratios == result.rows[1][1]['ratios']


def test_printed_line_builds_a_model_with_the_fitted_anchors(coco_known_ratios, capsys):
    main = runpy.run_path(os.path.join(ROOT, 'tools/optimize_anchors.py'))['main']
    main(['-c', RETINA_CFG, '-o', *coco_known_ratios])
    out = capsys.readouterr().out
    assert re.search(r'config\s+0\.\d{4}\s+\d\.\d{4}', out) and 'BPR (best IoU >= 0.5)' in out, out
    line = re.search(r'^\s+-o (model\.bbox_head\.anchor_generator\..*)$', out, re.M)
    assert line, out
    items = line.group(1).split()
    ratios = json.loads(next(i for i in items if '.ratios=' in i).split('=', 1)[1])
    from detection.registry import MODELS

    cfg = load_config(RETINA_CFG, [*items, 'model.backbone.depth=18', 'model.num_classes=1'])
    with DefaultScope.overwrite_default_scope('detection'):
        model = MODELS.build(cfg.model)
    generator = model.bbox_head.prior_generator
    assert generator.ratios == ratios
    base = generator.base_anchors[0]
    built = ((base[:, 3] - base[:, 1]) / (base[:, 2] - base[:, 0])).reshape(3, -1)  # ratio-major
    torch.testing.assert_close(built, torch.tensor(ratios)[:, None].expand_as(built), rtol=1e-5, atol=0)


def test_ssd_fit_keeps_the_per_level_counts(coco_known_ratios):
    cfg = load_config(SSD_CFG, coco_known_ratios)
    anchors = find_grid_anchors(cfg.model.to_dict(), SSD_CFG)
    result = fit_grid_anchors(cfg, SSD_CFG, anchors)
    assert result.input_wh == (300, 300)
    fitted = result.rows[1][1]['aspect_ratios']
    assert [len(level) for level in fitted] == [1, 2, 2, 2, 1, 1]  # SSD300's 4 or 6 boxes per position stay
    np.testing.assert_allclose(np.concatenate(fitted), 3.0, rtol=0.05)
    assert result.rows[result.best][2].mean_iou >= result.rows[0][2].mean_iou
    generator = build_generator({**anchors.cfg, 'aspect_ratios': fitted}, anchors.key)
    assert generator.num_base_priors == [4, 6, 6, 6, 4, 4]


def test_anchors_of_other_kinds_are_refused():
    with pytest.raises(ConfigError, match=r"cannot fit these anchors \(model\.bbox_head\.anchor_generator of type "
                                          r"'AnchorGenerator' but no model\.train_cfg\.assigner\.pos_iou_thr.*"
                                          r"fits three kinds of anchors"):
        optimize_config_anchors(FCOS_CFG)
    with pytest.raises(ConfigError, match='cannot fit these anchors.*PointGenerator'):
        find_grid_anchors({'bbox_head': {'anchor_generator': {'type': 'PointGenerator'}}}, 'x.yaml')
    with pytest.raises(ConfigError, match='--num sets how many YOLO anchors'):
        optimize_config_anchors(RETINA_CFG, num=4)


def test_torchvision_presets_scale_boxes_as_their_preprocessor_resizes():
    ssdlite = load_config(os.path.join(ROOT, 'configs/detection/ssd/ssdlite320_mobilenetv3_torchvision_coco.yaml'))
    assert training_scaling(ssdlite) == Scaling((320, 320), False, 'model.data_preprocessor fixed_size')
    stretched = training_scaling(ssdlite, input_size=256)
    assert stretched.scale == (256, 256) and not stretched.keep_ratio
    retina = load_config(os.path.join(ROOT, 'configs/detection/retinanet/retinanet_r50_fpn_torchvision_coco.yaml'))
    scaling = training_scaling(retina)
    assert scaling.keep_ratio and scaling.scale == (1333, 800)
    np.testing.assert_allclose(scaling.factors(640, 480), 800 / 480, rtol=1e-3)  # short side to 800 (whole pixels)
    with pytest.raises(ConfigError, match='model.data_preprocessor.*or pass --input-size'):
        training_scaling(load_config(os.path.join(ROOT, 'configs/detection/ssd/ssdlite320_mobilenetv3_torchvision_'
                                                  'coco.yaml'), ['model.data_preprocessor.fixed_size=[0]']))
