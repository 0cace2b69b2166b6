"""GAN hooks and pictures: channel order, input | output | target rows, the report's PSNR ranking against a
hand-computed PSNR, fixed-noise grids that repeat exactly and leave the global RNG alone."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch

from gan.engine import EvaluationReportHook, PredictionPicturesHook, SampleGridHook
from gan.registry import HOOKS, MODELS
from gan.structures import GANDataSample
from gan.visualization import enlarge, sample_row, source_field, target_field, to_bgr


def _sample(i: int, err: float, size: int = 8) -> GANDataSample:
    """A translation sample whose output differs from its target by ``err`` (0..255) everywhere."""
    gt = torch.full((3, size, size), 100.0)
    gt[0] = 200.0  # red channel: to_bgr must put it last
    s = GANDataSample(metainfo={'img_path': f'/x/{i:03d}.png'})
    s.real_A, s.real_B, s.gt_img, s.fake_img = torch.zeros(3, size, size), gt, gt, gt + err
    return s


def test_pictures_channel_order_rows_and_fields():
    img = torch.zeros(3, 2, 2)
    img[0] = 255.0
    assert to_bgr(img)[0, 0].tolist() == [0, 0, 255]  # RGB red -> BGR red
    assert to_bgr(torch.full((1, 2, 2), 7.4))[0, 0].tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match=r'\[C, H, W\]'):
        to_bgr(torch.zeros(2, 2))
    assert enlarge(np.zeros((32, 48, 3), np.uint8)).shape == (128, 192, 3)
    s = _sample(0, 5.0)
    assert source_field(s) == 'real_A' and target_field(s) == 'gt_img'
    assert source_field(s, 'BtoA') == 'real_B'
    row = sample_row(s)  # 3 panels of 128 px + 2 gaps of 4 px, caption bar on top
    assert row.shape[1] == 3 * 128 + 2 * 4 and row.shape[0] > 128 and row.dtype == np.uint8
    noise = GANDataSample()
    noise.fake_img = torch.zeros(3, 8, 8)
    assert source_field(noise) is None and sample_row(noise).shape[1] == 128


def test_report_ranks_worst_pairs_by_hand_computed_psnr(tmp_path):
    hook = HOOKS.build({'type': 'EvaluationReportHook', 'out_file': 'r.html', 'num_worst': 2, 'num_samples': 3})
    assert isinstance(hook, EvaluationReportHook)
    runner = SimpleNamespace(model=torch.nn.Module(), work_dir=str(tmp_path), logger=SimpleNamespace(info=print))
    errs = [1.0, 8.0, 2.0, 16.0, 4.0]
    hook.before_test(runner)
    hook.after_test_iter(runner, 0, outputs=[_sample(i, e) for i, e in enumerate(errs[:3])])
    hook.after_test_iter(runner, 1, outputs=[_sample(i + 3, e) for i, e in enumerate(errs[3:])])
    want = [10 * math.log10(255.0 ** 2 / e ** 2) for e in errs]  # MSE = err^2
    assert hook._psnrs == pytest.approx(want, abs=1e-4)
    hook.after_test_epoch(runner, {'gan/psnr': float(np.mean(want))})
    html = (tmp_path / 'r.html').read_text()
    worst = [f'{i:03d}.png: PSNR {want[i]:.2f} dB' for i in (3, 1)]  # err 16 then 8
    assert html.index(worst[0]) < html.index(worst[1]) and '000.png: PSNR' not in html
    assert 'gan/psnr' in html and html.count('data:image/png;base64,') == 1 + 2  # samples grid + 2 worst


def _runner(model, work_dir, dataset=None):
    loader = None if dataset is None else SimpleNamespace(dataset=dataset)
    return SimpleNamespace(model=model, work_dir=str(work_dir), iter=9, max_iters=100, val_dataloader=loader,
                           train_dataloader=None, test_dataloader=loader, logger=SimpleNamespace(info=print))


def test_sample_grid_noise_model_fixed_class_sweep(tmp_path):
    model = MODELS.build({'type': 'CGAN', 'num_classes': 3, 'noise_size': 8,
                          'generator': {'type': 'DCGANGenerator', 'out_channels': 3, 'ngf': 8, 'output_size': 16},
                          'discriminator': {'type': 'DCGANDiscriminator', 'in_channels': 3, 'ndf': 8,
                                            'input_size': 16}})
    hook = HOOKS.build({'type': 'SampleGridHook', 'interval': 10, 'num': 6, 'seed': 3})
    assert isinstance(hook, SampleGridHook)
    runner = _runner(model, tmp_path)
    model.train()
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    hook.after_train_iter(runner, 0)  # iteration 10: every 10
    assert torch.rand(1) == before  # the fixed noise is drawn from its own generators
    path = tmp_path / 'samples' / 'iter_000010.png'
    first = cv2.imread(str(path))
    # 3 columns (classes), 2 rows of 16-px samples enlarged 4x
    assert first.shape == (2 * 64 + 3 * 2, 3 * 64 + 4 * 2, 3) and model.training
    hook.write(runner, 11)
    assert np.array_equal(cv2.imread(str(tmp_path / 'samples' / 'iter_000011.png')), first)
    with pytest.raises(ValueError, match='interval'):
        SampleGridHook(interval=0)


def test_sample_grid_and_pictures_translation_model(tmp_path):
    """Fixed validation inputs (fetched with the python / numpy RNG restored) as input | output | target rows;
    --show-dir writes one row per sample and the summary."""
    model = MODELS.build({'type': 'Pix2Pix', 'generator': {'type': 'UNetGenerator', 'ngf': 4, 'num_downs': 5},
                          'discriminator': {'type': 'PatchDiscriminator', 'in_channels': 6, 'ndf': 4,
                                            'n_layers': 1}})
    gen = torch.Generator().manual_seed(0)

    def item(i):
        a, b = (torch.randint(0, 256, (3, 32, 32), generator=gen, dtype=torch.uint8) for _ in range(2))
        np.random.rand()  # a pipeline's random transform: must not move the training RNG
        random.random()
        return {'inputs': {'img_A': a, 'img_B': b}, 'data_samples': GANDataSample(metainfo={'img_path': f'{i}.png'})}

    dataset = [item(i) for i in range(3)]

    class Lazy(list):
        def __getitem__(self, i):
            np.random.rand()
            random.random()
            return list.__getitem__(self, i)

    runner = _runner(model, tmp_path, Lazy(dataset))
    np.random.seed(1)
    random.seed(1)
    want = np.random.rand(), random.random()
    np.random.seed(1)
    random.seed(1)
    hook = SampleGridHook(interval=5, num=2, ncols=1)
    path = hook.write(runner, 5)
    assert (np.random.rand(), random.random()) == want
    grid = cv2.imread(path)
    assert grid.shape[1] == 3 * 128 + 2 * 4 + 2 * 4 and grid.shape[0] > 2 * 128  # 1 column of 2 rows
    pics = PredictionPicturesHook(out_dir=str(tmp_path / 'show'), max_images=2)
    pics.before_test(runner)
    data = model.data_preprocessor({'inputs': {k: [d['inputs'][k] for d in dataset] for k in ('img_A', 'img_B')},
                                    'data_samples': [d['data_samples'] for d in dataset]}, False)
    pics.after_test_iter(runner, 0, outputs=model.predict(data['inputs'], data['data_samples']))
    pics.after_test(runner)
    assert sorted(p.name for p in (tmp_path / 'show').iterdir()) == ['0.png', '1.png', 'summary.png']
