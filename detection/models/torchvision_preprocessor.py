"""torchvision's ``GeneralizedRCNNTransform`` as a data preprocessor: normalise first, then resize the float image.

oars' own pipeline resizes uint8 images in the data workers and normalises the padded batch on the device
(MMDetection's order). torchvision's detection models normalise a [0, 1] float image and then resize it
bilinearly so that its short side is ``min_size`` (long side at most ``max_size``). The two orders give slightly
different input tensors, which is enough to change a converted torchvision model's boxes by a few pixels, so the
``torchvision`` presets (``configs/_base_/models/*_torchvision.yaml``) load images at their original size (no
``Resize`` in the pipeline) and resize here, exactly as torchvision does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from detection.registry import MODELS
from oars.models.data_preprocessor import ImageDataPreprocessor

TORCHVISION_MEAN = (0.485, 0.456, 0.406)
TORCHVISION_STD = (0.229, 0.224, 0.225)


def torchvision_resize_scale(height: int, width: int, min_size: int, max_size: int) -> float:
    """The factor torchvision's ``GeneralizedRCNNTransform`` resizes an image by.

    Args:
        height, width: the image's size in pixels.
        min_size: the target length of the short side.
        max_size: the most the long side may become (it wins when the aspect ratio is extreme).

    Returns:
        ``min(min_size / short side, max_size / long side)``; the resized size is ``floor(side * scale)``.
    """
    return min(min_size / min(height, width), max_size / max(height, width))


@MODELS.register_module()
class TorchvisionRCNNPreprocessor(ImageDataPreprocessor):
    """uint8 [3, H, W] images at their original size -> a batch as torchvision's R-CNN models build it.

    Per image (on the model's device): BGR->RGB when ``bgr_to_rgb``, float, divided by ``pixel_scale`` (torchvision
    models take [0, 1] images), ``(x - mean) / std``, then ``F.interpolate`` (bilinear, ``align_corners=False``)
    by :func:`torchvision_resize_scale` (output size ``floor(side * scale)``). Images are padded bottom/right with
    0 (in normalised units, as torchvision) to the largest one, rounded up to ``pad_size_divisor``.

    Metainfo: ``img_shape`` becomes the resized size; ``scale_factor`` is multiplied by ``(w'/w, h'/h)`` (so it
    stays "network pixels / original pixels" when the pipeline resized too); ``ori_shape`` is set when missing;
    ``batch_input_shape`` and ``pad_shape`` are the padded size. In training, ``gt_instances`` /
    ``ignored_instances`` boxes are scaled by the same ratios (float32 ``new / old`` per axis, torchvision's
    ``resize_boxes``) and their ``masks`` (uint8 ``[N, H, W]``) resized with nearest sampling, as torchvision.

    Args:
        mean, std: per-channel statistics in units of the input divided by ``pixel_scale`` (default ImageNet's,
            torchvision's ``image_mean`` / ``image_std``).
        bgr_to_rgb: the pipeline loads BGR (OpenCV); torchvision models expect RGB.
        pixel_scale: the input is divided by this before normalisation (255: uint8 -> [0, 1]).
        min_size: short side after resizing; a list: training picks one per image at random, evaluation uses
            the last (torchvision's ``min_size`` tuple).
        max_size: bound of the long side after resizing.
        pad_size_divisor: the batch is padded to a multiple of this (32, torchvision's ``size_divisible``).
    """

    def __init__(
        self,
        mean: Sequence[float] = TORCHVISION_MEAN,
        std: Sequence[float] = TORCHVISION_STD,
        bgr_to_rgb: bool = True,
        pixel_scale: float = 255.0,
        min_size: int | Sequence[int] = 800,
        max_size: int = 1333,
        pad_size_divisor: int = 32,
        non_blocking: bool = False,
    ) -> None:
        super().__init__(mean=mean, std=std, bgr_to_rgb=bgr_to_rgb, size_divisor=pad_size_divisor, pad_val=0,
                         non_blocking=non_blocking)
        name = type(self).__name__
        sizes = [min_size] if isinstance(min_size, int) else list(min_size)
        if not sizes or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes):
            raise ValueError(f"{name}: min_size must be a positive int or a non-empty list of them, got {min_size!r}")
        if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
            raise ValueError(f"{name}: max_size must be a positive int, got {max_size!r}")
        if not float(pixel_scale) > 0:
            raise ValueError(f"{name}: pixel_scale must be > 0, got {pixel_scale!r}")
        self.min_sizes = sizes
        self.max_size = max_size
        self.pixel_scale = float(pixel_scale)

    def _normalise(self, batch: Tensor) -> Tensor:
        """uint8/float ``[B, 3, H, W]`` -> float32 ``(x / pixel_scale - mean) / std`` (torchvision's order of ops)."""
        if self.bgr_to_rgb:
            batch = batch.flip(1)
        batch = batch.float()
        if self.pixel_scale != 1.0:
            batch = batch / self.pixel_scale
        return (batch - self.mean) / self.std

    def _min_size(self, training: bool) -> int:
        if training and len(self.min_sizes) > 1:
            return self.min_sizes[int(torch.randint(len(self.min_sizes), ()).item())]
        return self.min_sizes[-1]

    def resize(self, image: Tensor, min_size: int) -> Tensor:
        """One normalised float image ``[3, H, W]`` -> ``[3, floor(H * s), floor(W * s)]`` (torchvision's resize)."""
        h, w = int(image.shape[-2]), int(image.shape[-1])
        scale = torchvision_resize_scale(h, w, min_size, self.max_size)
        return F.interpolate(image[None], scale_factor=scale, mode="bilinear", recompute_scale_factor=True,
                             align_corners=False)[0]

    @staticmethod
    def _resize_targets(sample: Any, old: tuple[int, int], new: tuple[int, int]) -> None:
        """Scale a training sample's boxes (float32 ``new / old`` per axis) and resize its masks (nearest).

        The sample gets new ``InstanceData`` objects (the other fields shared), so that the caller's annotations
        are not rescaled in place (a batch fed twice would otherwise be resized twice)."""
        for key in ("gt_instances", "ignored_instances"):
            inst = sample.get(key, None)
            if inst is None or "bboxes" not in inst:
                continue
            boxes = torch.as_tensor(inst.bboxes)
            device = boxes.device
            ratio_h = torch.tensor(new[0], dtype=torch.float32, device=device) / torch.tensor(
                old[0], dtype=torch.float32, device=device)
            ratio_w = torch.tensor(new[1], dtype=torch.float32, device=device) / torch.tensor(
                old[1], dtype=torch.float32, device=device)
            fields = dict(bboxes=boxes.float() * torch.stack([ratio_w, ratio_h, ratio_w, ratio_h]))
            if "masks" in inst:
                masks = inst.masks
                if not isinstance(masks, Tensor) or masks.dim() != 3:
                    raise ValueError(
                        f"TorchvisionRCNNPreprocessor: {key}.masks must be a [N, H, W] uint8 tensor "
                        f"(LoadAnnotations(with_mask=True)), got {type(masks).__name__}"
                        f"{tuple(masks.shape) if isinstance(masks, Tensor) else ''}"
                    )
                if tuple(masks.shape[-2:]) != old:
                    raise ValueError(f"TorchvisionRCNNPreprocessor: {key}.masks are {tuple(masks.shape[-2:])} but the "
                                     f"image is {old}; masks must be in the image's pixels")
                resized = F.interpolate(masks[:, None].float(), size=new, mode="nearest")[:, 0]
                fields["masks"] = resized.to(masks.dtype if masks.dtype != torch.bool else torch.uint8)
            setattr(sample, key, inst.new(**{**dict(inst.items()), **fields}))  # new() copies no data fields

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': images at original size, 'data_samples': samples or None}`` -> the resized, padded batch
        ``[B, 3, H', W']`` float32 and the samples with updated metainfo (see the class docstring)."""
        data = self.cast_data(data)
        images, samples = self._check_inputs(data)
        resized: list[Tensor] = []
        for i, img in enumerate(images):
            old = (int(img.shape[-2]), int(img.shape[-1]))
            out = self.resize(self._normalise(img[None])[0], self._min_size(training))
            new = (int(out.shape[-2]), int(out.shape[-1]))
            resized.append(out)
            if samples is None:
                continue
            sample = samples[i]
            meta = sample.metainfo
            sw, sh = meta.get("scale_factor", (1.0, 1.0))[:2]
            update = dict(img_shape=new, scale_factor=(sw * new[1] / old[1], sh * new[0] / old[0]))
            if "ori_shape" not in meta:
                update["ori_shape"] = old
            sample.set_metainfo(update)
            if training:
                self._resize_targets(sample, old, new)
        h = max(r.shape[-2] for r in resized)
        w = max(r.shape[-1] for r in resized)
        d = self.size_divisor or 1
        h, w = math.ceil(h / d) * d, math.ceil(w / d) * d
        batch = resized[0].new_zeros((len(resized), resized[0].shape[0], h, w))
        for i, r in enumerate(resized):
            batch[i, :, : r.shape[-2], : r.shape[-1]] = r
        if samples is not None:
            for sample in samples:
                sample.set_metainfo(dict(batch_input_shape=(h, w), pad_shape=(h, w)))
        return dict(inputs=batch, data_samples=samples)
