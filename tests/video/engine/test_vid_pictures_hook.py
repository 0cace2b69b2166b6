"""Video ``--show-dir`` hook on a fake runner: strip PNGs with labels in green/red, GIFs with the first view's
frames, summary grid; reached by name through the video scope as tools/eval.py does."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
from mmengine.registry import HOOKS as ROOT_HOOKS
from PIL import Image

from video.engine import PredictionPicturesHook, VideoReportHook
from video.registry import HOOKS
from video.structures import ActionDataSample
from video.visualization import GREEN, RED, even_frames, first_view_frames

CLASSES = ('left', 'right', 'up')


def fake_runner(tmp_path, metrics=(), n=4):
    class DS:
        metainfo = {'classes': CLASSES}

        def __len__(self):
            return n

    return SimpleNamespace(test_dataloader=SimpleNamespace(dataset=DS()),
                           test_evaluator=SimpleNamespace(metrics=list(metrics), dataset_meta=DS.metainfo),
                           work_dir=str(tmp_path), logger=logging.getLogger('test_vid_hooks'))


def frames_nchw(t, size=32, offset=0):
    """[t, 3, size, size] uint8, frame i filled with grey level 10 * (i + offset) in B, 5 in G, 200 in R."""
    x = np.zeros((t, 3, size, size), np.uint8)
    x[:, 0] = (10 * (np.arange(t) + offset))[:, None, None]
    x[:, 1], x[:, 2] = 5, 200
    return torch.from_numpy(x)


def sample(name, scores, label, **meta):
    ds = ActionDataSample(metainfo={'filename': f'/data/videos/{name}.mp4', 'num_crops': 1, **meta})
    ds.set_gt_label(label)
    ds.pred_score = torch.tensor(scores, dtype=torch.float32)
    return ds


def colour_pixels(img, bgr):
    return int((np.abs(img.astype(int) - np.array(bgr)).sum(-1) < 60).sum())


def test_scope_lookup_as_tools_eval_does():
    with ROOT_HOOKS.switch_scope_and_registry('video') as registry:
        assert registry.get('PredictionPicturesHook') is PredictionPicturesHook
        assert registry.get('EvaluationReportHook') is VideoReportHook


def test_first_view_frames_layouts():
    nchw = torch.cat([frames_nchw(4), frames_nchw(4, offset=10), frames_nchw(4, offset=20)])  # 3 crops x 4
    view = first_view_frames(nchw, num_crops=3)
    assert view.shape == (4, 32, 32, 3) and view[:, 0, 0, 0].tolist() == [0, 10, 20, 30]
    ncthw = torch.stack([frames_nchw(16).permute(1, 0, 2, 3), frames_nchw(16, offset=5).permute(1, 0, 2, 3)])
    view = first_view_frames(ncthw)  # [2 clips, 3, 16, H, W] -> the first clip
    assert view.shape == (16, 32, 32, 3) and view[:, 0, 0, 0].tolist() == list(range(0, 160, 10))
    assert even_frames(view, 8)[:, 0, 0, 0].tolist() == [0, 20, 40, 60, 90, 110, 130, 150]
    with pytest.raises(ValueError, match='uint8'):
        first_view_frames(nchw.float())
    with pytest.raises(ValueError, match='num_crops=5'):
        first_view_frames(nchw, num_crops=5)


def test_hook_writes_strips_gifs_and_summary(tmp_path):
    out = tmp_path / 'show'
    hook = HOOKS.build(dict(type='PredictionPicturesHook', out_dir=str(out), max_images=3, frame_height=64))
    runner = fake_runner(tmp_path)
    hook.before_test(runner)
    right = sample('walk', [0.1, 0.8, 0.1], 1)  # correct
    wrong = sample('jump', [0.6, 0.3, 0.1], 2)  # wrong
    batch = {'inputs': [frames_nchw(12), torch.stack([frames_nchw(16).permute(1, 0, 2, 3)] * 2)],
             'data_samples': [right, wrong]}
    hook.after_test_iter(runner, 0, batch, [right, wrong])
    # same file name again (other clip of the same video), then one over max_images
    hook.after_test_iter(runner, 1, {'inputs': [frames_nchw(4), frames_nchw(4)]},
                         [sample('walk', [0.2, 0.7, 0.1], 1), sample('extra', [1, 0, 0], 0)])
    hook.after_test(runner)
    names = sorted(p.name for p in out.iterdir())
    assert names == ['jump.gif', 'jump.png', 'summary.png', 'walk.gif', 'walk.png', 'walk_1.gif', 'walk_1.png']

    strip = cv2.imread(str(out / 'walk.png'))
    assert strip.shape[1] == 8 * 64 + 7 * 2  # 12 frames reduced to 8, each 64 px wide, 2 px gaps
    assert strip.shape[0] > 64  # label lines under the frames
    text = strip[64:]
    assert colour_pixels(text, GREEN) > 20  # the top-1 (right) is a true class
    assert colour_pixels(text, RED) > 20  # the other two of the top 3 are not
    wrong_text = cv2.imread(str(out / 'jump.png'))[64:]
    assert colour_pixels(wrong_text, RED) > colour_pixels(text, RED)  # all three predictions wrong

    with Image.open(out / 'walk.gif') as gif:
        assert gif.n_frames == 12  # every frame of the first view
        gif.seek(3)
        rgb = np.asarray(gif.convert('RGB'))
        assert abs(int(rgb[rgb.shape[0] // 4, rgb.shape[1] // 2, 2]) - 30) <= 6  # frame 3's blue level
    with Image.open(out / 'jump.gif') as gif:
        assert gif.n_frames == 16  # NCTHW: the first clip's 16 frames
    assert cv2.imread(str(out / 'summary.png')) is not None


def test_hook_without_frames_or_labels(tmp_path):
    out = tmp_path / 'show'
    hook = PredictionPicturesHook(str(out), gif=True)
    runner = fake_runner(tmp_path)
    hook.before_test(runner)
    feat = ActionDataSample(metainfo={'filename': '/f/clip7.npz'})
    feat.pred_score = torch.tensor([0.2, 0.3, 0.5])
    hook.after_test_iter(runner, 0, {'inputs': [{'rgb': torch.zeros(5, 8)}]}, [feat])
    assert sorted(p.name for p in out.iterdir()) == ['clip7.png']  # labels panel only, no GIF
    img = cv2.imread(str(out / 'clip7.png'))
    assert img.shape[1] == 320 and colour_pixels(img, GREEN) == 0 and colour_pixels(img, RED) == 0
    with pytest.raises(ValueError, match='max_frames'):
        PredictionPicturesHook(str(out), max_frames=0)


def test_batch_inputs_from_either_collate():
    from video.engine.clip_pictures import batch_inputs

    stacked = torch.stack([frames_nchw(4), frames_nchw(4, offset=1)])  # default_collate
    assert [x.shape for x in batch_inputs({'inputs': stacked}, 2)] == [(4, 3, 32, 32)] * 2
    assert batch_inputs({'inputs': [frames_nchw(4)]}, 2) == [None, None]  # not this batch's layout: no frames
    assert batch_inputs(None, 1) == [None]
