"""STGAN (Liu et al. 2019): AttGAN conditioned on the attribute difference, with selective transfer units."""

from __future__ import annotations

import torch

from gan.registry import MODELS

from ..base_gan import Tensors
from .attgan import AttGAN


@MODELS.register_module()
class STGAN(AttGAN):
    """:class:`AttGAN` whose generator (:class:`STGANGenerator`) gets the DIFFERENCE of the scaled attribute codes,
    ``scale(target) - scale(source)`` = ``2 * thres_int * (target - source)`` for 0/1 vectors: zero for an
    attribute that stays, +-2 * thres_int for one that changes; the reconstruction decodes a zero difference.
    Losses and weights are AttGAN's (lambda_rec 100, lambda_cls_g 10, lambda_cls_d 1, lambda_gp 10, n_critic 5).

    Predict needs the source attributes (``inputs['attrs']``) as well as the targets. Export (``mode='tensor'``):
    ``img`` [B, 3, H, W] in [-1, 1], ``attrs`` [B, K] (the TARGET attributes, 0/1) and ``src_attrs`` [B, K] (the
    SOURCE attributes, 0/1); the graph forms the scaled difference itself, so a deployed model is fed plain
    attribute vectors as for StarGAN/AttGAN plus the source ones.
    """

    needs_source = True

    def condition(self, source: torch.Tensor | None, target: torch.Tensor) -> torch.Tensor:
        if source is None:
            raise ValueError("STGAN: the edit needs the source attributes (inputs['attrs'] in a batch, 'src_attrs' "
                             "in the exported graph's inputs): the generator is driven by target - source")
        return self.scale(target) - self.scale(source)

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 128) -> Tensors:
        """``img``, ``attrs`` (targets) and ``src_attrs`` (sources: the targets with every attribute flipped)."""
        inputs = super().export_inputs(batch, img_size)
        inputs["src_attrs"] = 1.0 - inputs["attrs"]
        return inputs
