"""Reading the generated and real images out of the data samples a GAN model's predict step returns.

mmengine's ``Evaluator`` hands metrics the samples as dicts (``BaseDataElement.to_dict()``); tests and tools may
pass ``GANDataSample`` objects. Both answer ``.get(key)``. Images are float [C, H, W] in 0..255 (the contract).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from oars.errors import DataError

# Where the real counterpart of ``fake_img`` is found, in order: the sample's real image, the translation target.
GT_KEYS: tuple[str, ...] = ('gt_img', 'real_B')


def sample_name(sample) -> str:
    """A sample's image path (for messages), or ``'a sample'``."""
    meta = sample.get('img_path') if hasattr(sample, 'get') else None
    return str(meta) if meta else 'a sample'


def image_field(owner: str, sample, keys: Sequence[str]) -> torch.Tensor:
    """The first of ``keys`` the sample holds, as float32 [C, H, W] on the CPU; ``DataError`` naming the keys
    and the sample when none is there or the value is not an image."""
    for key in keys:
        value = sample.get(key)
        if value is None:
            continue
        value = torch.as_tensor(value).detach().cpu().float()
        if value.dim() != 3:
            raise DataError(f"{owner}: {key} of {sample_name(sample)} must be [C, H, W], got {tuple(value.shape)}")
        return value
    raise DataError(f'{owner}: data sample of {sample_name(sample)} has none of {list(keys)} (the model sets '
                    f'them at predict time, float [C, H, W] 0..255)')


def stack_pairs(owner: str, samples: Sequence, fake_key: str, gt_keys: Sequence[str]) -> list[tuple[torch.Tensor,
                                                                                                    torch.Tensor]]:
    """``(fake [N, C, H, W], gt [N, C, H, W])`` groups of equal-shaped pairs (one group when the batch has one
    size); a fake image whose size differs from its ground truth's is a ``DataError`` naming the sample."""
    groups: dict[tuple, tuple[list, list]] = {}
    for sample in samples:
        fake = image_field(owner, sample, (fake_key,))
        gt = image_field(owner, sample, gt_keys)
        if fake.shape != gt.shape:
            raise DataError(f'{owner}: {fake_key} {tuple(fake.shape)} and its ground truth {tuple(gt.shape)} of '
                            f'{sample_name(sample)} differ in shape')
        fakes, gts = groups.setdefault(tuple(fake.shape), ([], []))
        fakes.append(fake)
        gts.append(gt)
    return [(torch.stack(f), torch.stack(g)) for f, g in groups.values()]
