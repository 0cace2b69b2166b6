"""FID and KID of generated images against real ones, on Inception-v3 features from a user-given weights file.

The features are computed batch by batch in ``process`` (on ``device``) and collected across ranks by mmengine;
the statistics are torchmetrics' ``FrechetInceptionDistance`` / ``KernelInceptionDistance`` over those features
(their feature extractor is the identity, since the features are already there). Without ``inception_weights``
the metric logs why it is skipped and returns nothing: the weights are never downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from torch import nn
from torchmetrics.image.fid import FrechetInceptionDistance
from torchmetrics.image.kid import KernelInceptionDistance

from gan.evaluation.fields import GT_KEYS, image_field
from gan.evaluation.inception import NUM_FEATURES, InceptionFeatures, pick_device
from gan.registry import METRICS
from oars.errors import DataError, DataFileNotFoundError


class _Features(nn.Module):
    """The identity on precomputed features [N, D] (torchmetrics' ``feature`` argument)."""

    def __init__(self, num_features: int = NUM_FEATURES) -> None:
        super().__init__()
        self.num_features = int(num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def frechet_distance(real: torch.Tensor, fake: torch.Tensor) -> float:
    """FID between two feature sets: float [N, D] and [M, D] (N, M >= 2) -> ``|mu_r - mu_f|^2 + tr(S_r) + tr(S_f)
    - 2 tr((S_r S_f)^(1/2))``.

    With at least D samples in a set this is torchmetrics' ``FrechetInceptionDistance`` (eigenvalues of the
    D x D product, about 20 s for D = 2048 on one CPU thread). With fewer, both covariances have rank < D and the
    trace term is computed exactly in the samples' space instead: the non-zero eigenvalues of ``S_r S_f`` are
    those of ``K K^T`` with ``K = X_r X_f^T / sqrt((N - 1)(M - 1))`` (centred features), so the trace of the
    square root is the nuclear norm of the N x M matrix ``K``; the two agree (tested on small D).
    """
    real, fake = real.double(), fake.double()
    if len(real) < 2 or len(fake) < 2:
        raise DataError(f'FID needs at least 2 real and 2 generated samples, got {len(real)} and {len(fake)}')
    dim = real.shape[1]
    if max(len(real), len(fake)) >= dim:
        fid = FrechetInceptionDistance(feature=_Features(dim)).set_dtype(torch.float64)
        fid.update(real, real=True)
        fid.update(fake, real=False)
        return float(fid.compute())
    xr, xf = real - real.mean(0), fake - fake.mean(0)
    cr, cf = len(real) - 1, len(fake) - 1
    trace_sqrt = torch.linalg.matrix_norm(xr @ xf.T, ord='nuc') / (cr * cf) ** 0.5
    mean_term = (real.mean(0) - fake.mean(0)).square().sum()
    return float(mean_term + xr.square().sum() / cr + xf.square().sum() / cf - 2 * trace_sqrt)


class _InceptionMetric(BaseMetric):
    """Shared part of FID and KID: Inception features of ``fake_key`` and of the real image of each sample.

    Args:
        inception_weights: path of a torchvision ``inception_v3`` state dict; None skips the metric.
        fake_key / real_keys: the generated image and where the real one is (first present).
        input_size: the side images are resized to before the network (299 as trained).
        batch_size: images per forward pass; device: where the network runs (None: CUDA if available).
    """

    default_prefix: str | None = 'gan'
    label: str = ''

    def __init__(self, inception_weights: str | None = None, fake_key: str = 'fake_img',
                 real_keys: Sequence[str] = GT_KEYS, input_size: int = 299, batch_size: int = 32,
                 device: str | None = None, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.inception_weights = inception_weights
        if inception_weights is not None and not isinstance(inception_weights, str):
            raise DataError(f'{self.label}: inception_weights must be a file path, got {inception_weights!r}')
        if inception_weights is not None:
            if not os.path.isfile(inception_weights):
                raise DataFileNotFoundError(f'{self.label}: inception_weights file not found: {inception_weights}')
        self.fake_key = fake_key
        self.real_keys = (real_keys,) if isinstance(real_keys, str) else tuple(real_keys)
        self.input_size = input_size
        self.batch_size = int(batch_size)
        self.device = pick_device(device)
        self._net: InceptionFeatures | None = None

    @property
    def skip_reason(self) -> str | None:
        if self.inception_weights is None:
            return f'{self.label} skipped: no inception_weights file given (weights are never downloaded)'
        return None

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """float [N, 3, H, W] 0..255 -> float32 [N, 2048] on the CPU (the network built on first use)."""
        if self._net is None:
            self._net = InceptionFeatures(self.input_size).load(self.inception_weights).to(self.device)
        chunks = [self._net(images[i: i + self.batch_size].to(self.device)).cpu()
                  for i in range(0, len(images), self.batch_size)]
        return torch.cat(chunks)

    def process(self, data_batch, data_samples: Sequence) -> None:
        """Features of the batch's fake and real images, one (fake [2048], real [2048]) pair per sample."""
        if self.skip_reason:
            return
        owner = self.label
        fakes = [image_field(owner, s, (self.fake_key,)) for s in data_samples]
        reals = [image_field(owner, s, self.real_keys) for s in data_samples]
        for group in (fakes, reals):
            if len({tuple(t.shape) for t in group}) > 1:
                group[:] = [torch.nn.functional.interpolate(t[None], size=(self.input_size,) * 2,
                                                            mode='bilinear', align_corners=False)[0] for t in group]
        f, r = self.features(torch.stack(fakes)), self.features(torch.stack(reals))
        self.results.extend(zip(f, r, strict=True))

    def evaluate(self, size: int) -> dict:
        """The metric, or ``{}`` with the skip reason in the log (no weights file)."""
        if self.skip_reason:
            self.results.clear()
            print_log(self.skip_reason, logger='current')
            return {}
        return super().evaluate(size)

    def _split(self, results: list) -> tuple[torch.Tensor, torch.Tensor]:
        fake = torch.stack([f for f, _ in results]).double()
        real = torch.stack([r for _, r in results]).double()
        return fake, real


@METRICS.register_module()
class FID(_InceptionMetric):
    """Fréchet Inception Distance between the generated and the real images of the evaluated set; key ``fid``.

    Needs at least 2 samples; with fewer than 2048 the covariances are rank-deficient and FID is biased upward
    (use >= 10k samples for numbers to report).
    """

    label = 'FID'

    def compute_metrics(self, results: list) -> dict[str, float]:
        fake, real = self._split(results)
        return {'fid': frechet_distance(real, fake)}


@METRICS.register_module()
class KID(_InceptionMetric):
    """Kernel Inception Distance (polynomial kernel, ``subsets`` random subsets of ``subset_size``, reduced to
    the number of samples when there are fewer); keys ``kid`` (mean) and ``kid_std``. The subsets are drawn
    from a torch generator seeded with ``seed``, so a result is reproducible."""

    label = 'KID'

    def __init__(self, subsets: int = 100, subset_size: int = 1000, seed: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.subsets, self.subset_size, self.seed = int(subsets), int(subset_size), int(seed)

    def compute_metrics(self, results: list) -> dict[str, float]:
        fake, real = self._split(results)
        size = min(self.subset_size, len(fake))
        if size < 2:
            raise DataError(f'KID needs at least 2 samples, got {len(fake)}')
        if size < self.subset_size:
            print_log(f'KID: {len(fake)} samples, fewer than subset_size {self.subset_size}; subsets of {size}',
                      logger='current')
        kid = KernelInceptionDistance(feature=_Features(real.shape[1]), subsets=self.subsets, subset_size=size)
        kid.update(real, real=True)
        kid.update(fake, real=False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            mean, std = kid.compute()
        return {'kid': float(mean), 'kid_std': float(std)}
