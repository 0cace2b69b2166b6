"""GAN metrics: PSNR/SSIM against numpy, MS-SSIM's size rule, FID/KID skipped without weights (no network) and
~0 for a set against itself with weights, attribute accuracy from a TorchScript classifier."""

from __future__ import annotations

import socket
import urllib.request

import numpy as np
import pytest
import torch
from mmengine.logging import MMLogger
from numpy.lib.stride_tricks import sliding_window_view

from gan.evaluation import FID, KID, MSSSIM, PSNR, SSIM, AttributeAccuracy
from gan.evaluation.fid import frechet_distance
from gan.structures import GANDataSample
from oars.errors import DataError, DataFileNotFoundError


def _numpy_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """SSIM of two [C, H, W] 0..255 images: 11x11 Gaussian window (sigma 1.5), C1/C2 of K = 0.01/0.03 (Wang et
    al. 2004), at every pixel of the image with its borders reflect-padded, averaged over channels and pixels."""
    g = np.exp(-((np.arange(11) - 5.0) ** 2) / (2 * 1.5**2))
    w = np.outer(g, g) / np.outer(g, g).sum()

    def filt(a):
        a = np.pad(a, ((0, 0), (5, 5), (5, 5)), mode='reflect')
        return (sliding_window_view(a, (11, 11), axis=(1, 2)) * w).sum(axis=(-1, -2))

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = filt(x), filt(y)
    vx, vy, cxy = filt(x * x) - mx**2, filt(y * y) - my**2, filt(x * y) - mx * my
    return float((((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))).mean())


def _evaluate(metric, samples, batch=2):
    for i in range(0, len(samples), batch):
        metric.process(None, samples[i: i + batch])
    return metric.evaluate(len(samples))


def test_psnr_ssim_equal_numpy_and_ms_ssim_rules():
    rng = np.random.default_rng(0)
    gt = rng.uniform(0, 255, (3, 3, 16, 20))
    fake = np.clip(gt + rng.normal(0, 20, gt.shape), 0, 255)
    samples = [dict(fake_img=torch.tensor(f, dtype=torch.float32), gt_img=torch.tensor(g, dtype=torch.float32),
                    img_path=f'{i}.png') for i, (f, g) in enumerate(zip(fake, gt))]
    f32, g32 = fake.astype(np.float32).astype(np.float64), gt.astype(np.float32).astype(np.float64)
    psnr = np.mean([10 * np.log10(255.0**2 / np.mean((f - g) ** 2)) for f, g in zip(f32, g32)])
    assert _evaluate(PSNR(), samples)['gan/psnr'] == pytest.approx(psnr, rel=1e-5)
    ssim = np.mean([_numpy_ssim(f, g) for f, g in zip(f32, g32)])
    assert _evaluate(SSIM(), samples)['gan/ssim'] == pytest.approx(ssim, abs=1e-4)
    cropped = np.mean([10 * np.log10(255.0**2 / np.mean((f[:, 2:-2, 2:-2] - g[:, 2:-2, 2:-2]) ** 2))
                       for f, g in zip(f32, g32)])
    assert _evaluate(PSNR(crop_border=2), samples)['gan/psnr'] == pytest.approx(cropped, rel=1e-5)
    # the translation target (real_B) is the ground truth when there is no gt_img; GANDataSample works as well
    pix = [GANDataSample(fake_img=s['fake_img'], real_B=s['gt_img']) for s in samples]
    assert _evaluate(PSNR(), pix)['gan/psnr'] == pytest.approx(psnr, rel=1e-5)
    with pytest.raises(DataError, match=r"none of \['gt_img', 'real_B'\]"):
        PSNR().process(None, [dict(fake_img=samples[0]['fake_img'], img_path='x.png')])
    with pytest.raises(DataError, match='needs both sides >= 161'):
        MSSSIM().process(None, samples)
    big = torch.rand(1, 3, 176, 176) * 255
    ms = MSSSIM()
    ms.process(None, [dict(fake_img=big[0], gt_img=big[0]), dict(fake_img=big[0], gt_img=255 - big[0])])
    assert ms.results[0] == pytest.approx(1.0, abs=1e-5) and ms.results[1] < 0.5


@pytest.fixture(scope='module')
def inception_file(tmp_path_factory):
    """A random-init torchvision inception_v3 state dict (He-initialised convolutions, so the features are
    neither vanishing nor exploding), saved like a user's weights file."""
    from torchvision.models import inception_v3

    torch.manual_seed(0)
    net = inception_v3(weights=None, aux_logits=True, init_weights=False)
    for m in net.modules():
        if isinstance(m, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(m.weight, nonlinearity='relu')
    path = tmp_path_factory.mktemp('inception') / 'inception_v3.pth'
    torch.save(net.state_dict(), path)  # with fc.* and AuxLogits.*, as torchvision's own file
    return str(path)


def test_fid_kid_skip_without_weights_and_never_touch_the_network(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise AssertionError('network access attempted')

    monkeypatch.setattr(socket, 'socket', refuse)
    monkeypatch.setattr(socket, 'create_connection', refuse)
    monkeypatch.setattr(urllib.request, 'urlopen', refuse)
    logged = []
    logger = MMLogger.get_current_instance()
    monkeypatch.setattr(logger, 'log', lambda level, msg, *a, **k: logged.append(str(msg)))
    img = torch.rand(3, 32, 32) * 255
    for cls, name in ((FID, 'FID'), (KID, 'KID')):
        metric = cls()
        metric.process(None, [dict(fake_img=img, gt_img=img)] * 2)
        assert metric.evaluate(2) == {}
        assert f'{name} skipped: no inception_weights file given (weights are never downloaded)' in logged
    acc = AttributeAccuracy()
    acc.process(None, [dict(fake_img=img, target_attrs=torch.ones(2))])
    assert acc.evaluate(1) == {} and any('AttributeAccuracy skipped' in m for m in logged)
    with pytest.raises(DataFileNotFoundError, match='inception_weights file not found: .*nope.pth'):
        FID(inception_weights=str(tmp_path / 'nope.pth'))


def test_fid_and_kid_with_a_weights_file(inception_file, tmp_path):
    gen = torch.Generator().manual_seed(0)
    imgs = torch.rand(4, 3, 40, 40, generator=gen) * 255
    same = [dict(fake_img=i, gt_img=i) for i in imgs]
    other = [dict(fake_img=i, gt_img=(i * 0.3).round()) for i in imgs]
    fid = FID(inception_weights=inception_file, input_size=75, device='cpu')
    fid.process(None, same)
    feats_same = list(fid.results)
    fid_same = fid.evaluate(4)['gan/fid']
    fid.process(None, other)  # the network is built once per metric
    feats_other = list(fid.results)
    fid_other = fid.evaluate(4)['gan/fid']
    assert fid_other > 1e-3 and abs(fid_same) < 1e-5 * fid_other
    kid = KID(inception_weights=inception_file, input_size=75, subsets=5, device='cpu')
    kid_same, kid_other = kid.compute_metrics(feats_same), kid.compute_metrics(feats_other)
    assert abs(kid_same['kid']) < 0.05 * kid_other['kid'] and kid_other['kid_std'] >= 0
    assert kid.compute_metrics(feats_other) == kid_other  # the subsets come from the seeded generator
    bad = tmp_path / 'resnet.pth'
    torch.save({'conv1.weight': torch.zeros(1)}, bad)
    with pytest.raises(DataError, match='resnet.pth is not a torchvision inception_v3 state dict'):
        FID(inception_weights=str(bad), input_size=75).process(None, same[:2])


def test_frechet_distance_small_sets_equal_torchmetrics():
    from torchmetrics.image.fid import FrechetInceptionDistance

    from gan.evaluation.fid import _Features

    gen = torch.Generator().manual_seed(3)
    real, fake = torch.randn(5, 16, generator=gen).double(), (torch.randn(7, 16, generator=gen) * 1.5 + 0.2).double()
    ref = FrechetInceptionDistance(feature=_Features(16)).set_dtype(torch.float64)
    ref.update(real, real=True)
    ref.update(fake, real=False)
    assert frechet_distance(real, fake) == pytest.approx(float(ref.compute()), rel=1e-6)  # sample-space trace
    big = torch.randn(20, 16, generator=gen).double()
    assert frechet_distance(big, big + 1.0) == pytest.approx(16.0, rel=1e-6)  # torchmetrics path: mean shift only
    with pytest.raises(DataError, match='at least 2'):
        frechet_distance(real[:1], fake)


class _MeanColourClassifier(torch.nn.Module):
    """Attribute 0 = 'red' (R mean > 128), attribute 1 = 'bright' (mean > 128); logits centred on 128."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x[:, 0].mean((1, 2)) - 128.0, x.mean((1, 2, 3)) - 128.0], dim=1)


def test_attribute_accuracy_with_a_torchscript_classifier(tmp_path):
    path = tmp_path / 'attr_cls.pt'
    torch.jit.save(torch.jit.script(_MeanColourClassifier()), str(path))
    red = torch.zeros(3, 8, 8)
    red[0] = 255  # red, not bright (mean 85)
    white = torch.full((3, 8, 8), 255.0)  # red and bright
    samples = [dict(fake_img=red, target_attrs=torch.tensor([1.0, 0.0]), attr_names=('Red', 'Bright')),
               dict(fake_img=white, target_attrs=torch.tensor([1.0, 0.0]), attr_names=('Red', 'Bright')),
               dict(fake_img=red, target_attrs=torch.tensor([0.0, 0.0]), attr_names=('Red', 'Bright'))]
    res = _evaluate(AttributeAccuracy(classifier=str(path), input_size=16, device='cpu'), samples)
    # correct: red (2/2 attrs), white (1/2: bright is wrong), red vs 'not red' (1/2) -> 4/6; Red 2/3, Bright 2/3
    assert res == {'gan/attr_acc': pytest.approx(4 / 6), 'gan/attr_acc/Red': pytest.approx(2 / 3),
                   'gan/attr_acc/Bright': pytest.approx(2 / 3)}
    with pytest.raises(DataError, match="has no 'target_attrs'"):
        AttributeAccuracy(classifier=str(path)).process(None, [dict(fake_img=red, img_path='f.png')])
