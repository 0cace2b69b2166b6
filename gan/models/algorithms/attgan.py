"""AttGAN (He et al. 2019): an encoder-decoder edits attributes; the decoder gets the scaled target attributes."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gan.registry import MODELS

from ..base_gan import Tensors
from .stargan import StarGAN

# The 13 CelebA attributes AttGAN and STGAN edit (their papers' and PaddleGAN's selected_attrs).
ATTGAN_ATTRS: tuple[str, ...] = (
    "Bald", "Bangs", "Black_Hair", "Blond_Hair", "Brown_Hair", "Bushy_Eyebrows", "Eyeglasses", "Male",
    "Mouth_Slightly_Open", "Mustache", "No_Beard", "Pale_Skin", "Young")


@MODELS.register_module()
class AttGAN(StarGAN):
    """:class:`StarGAN`'s training engine (targets, WGAN-GP, a two-headed discriminator) with AttGAN's generator
    use and weights.

    The generator (:class:`AttGANGenerator`) encodes the face once and decodes it twice: with the target code (the
    edit) and with the source code (the reconstruction, an L1 term, lambda_rec 100); there is no cycle. The code is
    the 0/1 attribute vector mapped to [-1, 1] and scaled by ``thres_int``: ``(2 a - 1) * thres_int`` (0.5, the
    authors' and PaddleGAN's; at test time a larger ``thres_int`` strengthens the edit). Classification losses are
    averaged over the attributes (``tf.losses.sigmoid_cross_entropy``): lambda_cls_g 10 (``cls_loss_g``),
    lambda_cls_d 1 (``cls_loss_d``); lambda_gp 10; the discriminator steps every iteration, the generator every
    ``n_critic`` (5).

    Predict and export as :class:`StarGAN`: ``img`` + ``attrs`` (the 0/1 target attributes; the scaling is inside
    the graph).
    """

    def __init__(self, generator: dict, discriminator: dict | None = None,
                 attr_names: Sequence[str] = ATTGAN_ATTRS, thres_int: float = 0.5,
                 cls_loss_d: dict | None = None, cls_loss_g: dict | None = None, rec_loss: dict | None = None,
                 cls_average_attrs: bool = True, **kwargs) -> None:
        if not isinstance(thres_int, (int, float)) or isinstance(thres_int, bool) or thres_int <= 0:
            raise ValueError(f"{type(self).__name__}.thres_int: expected a number > 0, got {thres_int!r}")
        super().__init__(
            generator, discriminator, attr_names=attr_names,
            cls_loss_d=cls_loss_d or {"type": "ClassificationLoss", "loss_weight": 1.0},
            cls_loss_g=cls_loss_g or {"type": "ClassificationLoss", "loss_weight": 10.0},
            rec_loss=rec_loss or {"type": "L1Loss", "loss_weight": 100.0},
            cls_average_attrs=cls_average_attrs, **kwargs)
        self.thres_int = float(thres_int)

    def scale(self, attrs: torch.Tensor) -> torch.Tensor:
        """0/1 attributes [B, K] -> the code ``(2 a - 1) * thres_int`` in [-thres_int, thres_int]."""
        return (attrs.float() * 2.0 - 1.0) * self.thres_int

    def condition(self, source: torch.Tensor | None, target: torch.Tensor) -> torch.Tensor:
        return self.scale(target)

    def translate(self, generator: nn.Module, img: torch.Tensor, source: torch.Tensor | None, target: torch.Tensor,
                  reconstruct: bool = False) -> Tensors:
        """Encode once; ``fake`` decodes with the code of source -> target, ``rec`` with source -> source."""
        feats = generator.encode(img)
        out = {"fake": generator.decode(feats, self.condition(source, target))}
        if reconstruct:
            out["rec"] = generator.decode(feats, self.condition(source, source))
        return out
