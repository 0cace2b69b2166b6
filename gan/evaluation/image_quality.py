"""Full-reference image quality of generated images against their ground truth: PSNR, SSIM, MS-SSIM.

Each is computed per image by torchmetrics (data range 255: the contract's 0..255 images) and averaged over the
images, as MMagic and the pix2pix papers report them (not torchmetrics' accumulated-MSE PSNR, which weights the
whole set as one image). An identical pair has PSNR ``inf``; the mean is then ``inf`` too.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.evaluator import BaseMetric
from torchmetrics.functional.image import (
    multiscale_structural_similarity_index_measure,
    peak_signal_noise_ratio,
    structural_similarity_index_measure,
)

from gan.evaluation.fields import GT_KEYS, stack_pairs
from gan.registry import METRICS
from oars.errors import DataError

DATA_RANGE = 255.0


def psnr_per_image(fake: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """PSNR in dB of each pair: float [N, C, H, W] 0..255 twice -> float [N]."""
    return peak_signal_noise_ratio(fake, gt, data_range=DATA_RANGE, reduction='none', dim=(1, 2, 3))


def ssim_per_image(fake: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """SSIM (Gaussian window 11, sigma 1.5, K = 0.01 / 0.03) of each pair: [N, C, H, W] twice -> float [N].

    torchmetrics averages the SSIM map over every pixel, the borders reflect-padded; MMagic and scikit-image
    average the valid region only, so their numbers differ slightly (~1e-3 on 16-pixel images, less on larger).
    """
    return structural_similarity_index_measure(fake, gt, data_range=DATA_RANGE, reduction='none')


MS_SSIM_MIN_SIDE = 161  # five scales of an 11-pixel window: the side must exceed (11 - 1) * 2 ** 4


def ms_ssim_per_image(fake: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """MS-SSIM (5 scales, the standard weights) of each pair: [N, C, H, W] with sides >= 161 -> float [N]."""
    if min(fake.shape[-2:]) < MS_SSIM_MIN_SIDE:
        raise DataError(f'MSSSIM: images are {fake.shape[-1]} x {fake.shape[-2]}; MS-SSIM with 5 scales of an '
                        f'11-pixel window needs both sides >= {MS_SSIM_MIN_SIDE} (use SSIM for smaller images)')
    return multiscale_structural_similarity_index_measure(fake, gt, data_range=DATA_RANGE, reduction='none')


class _PerImageMetric(BaseMetric):
    """Mean over images of a per-image score of ``fake_key`` against the first of ``gt_keys`` a sample holds.

    ``crop_border``: pixels removed from each side before scoring (super-resolution convention; 0 for GANs).
    """

    name: str = ''
    default_prefix: str | None = 'gan'

    def __init__(self, fake_key: str = 'fake_img', gt_keys: Sequence[str] = GT_KEYS, crop_border: int = 0,
                 collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if isinstance(crop_border, bool) or not isinstance(crop_border, int) or crop_border < 0:
            raise DataError(f'{type(self).__name__}: crop_border must be an integer >= 0, got {crop_border!r}')
        self.fake_key = fake_key
        self.gt_keys = (gt_keys,) if isinstance(gt_keys, str) else tuple(gt_keys)
        self.crop_border = crop_border

    @staticmethod
    def score(fake: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def process(self, data_batch, data_samples: Sequence) -> None:
        """Score every pair of the batch (vectorised per image size); keep one float per image."""
        for fake, gt in stack_pairs(type(self).__name__, data_samples, self.fake_key, self.gt_keys):
            c = self.crop_border
            if c:
                if min(fake.shape[-2:]) <= 2 * c:
                    raise DataError(f'{type(self).__name__}: crop_border {c} leaves nothing of '
                                    f'{fake.shape[-1]} x {fake.shape[-2]} images')
                fake, gt = fake[..., c:-c, c:-c], gt[..., c:-c, c:-c]
            self.results.extend(float(v) for v in self.score(fake, gt))

    def compute_metrics(self, results: list) -> dict[str, float]:
        return {self.name: float(torch.tensor(results, dtype=torch.float64).mean())}


@METRICS.register_module()
class PSNR(_PerImageMetric):
    """Mean PSNR (dB) of ``fake_img`` vs. ``gt_img`` / ``real_B``; result key ``psnr``."""

    name = 'psnr'
    score = staticmethod(psnr_per_image)


@METRICS.register_module()
class SSIM(_PerImageMetric):
    """Mean SSIM of ``fake_img`` vs. ``gt_img`` / ``real_B``; result key ``ssim``."""

    name = 'ssim'
    score = staticmethod(ssim_per_image)


@METRICS.register_module()
class MSSSIM(_PerImageMetric):
    """Mean MS-SSIM of ``fake_img`` vs. ``gt_img`` / ``real_B`` (sides >= 161 px); result key ``ms_ssim``."""

    name = 'ms_ssim'
    score = staticmethod(ms_ssim_per_image)
