"""pix2pix (Isola et al. 2017): paired image-to-image translation with a conditional PatchGAN and an L1 term."""

from __future__ import annotations

import torch

from gan.registry import MODELS

from ..base_gan import BaseGAN, Tensors

DIRECTIONS = ("AtoB", "BtoA")


@MODELS.register_module()
class Pix2Pix(BaseGAN):
    """Translate ``inputs['img_A']`` -> ``inputs['img_B']`` (``direction: AtoB``) or back (``BtoA``).

    D judges the pair concat(source, image) (6 channels): ``0.5 * (gan_loss(D(src, real), real) +
    gan_loss(D(src, fake), fake))`` (the paper halves D's objective to slow it down against G). G:
    ``gan_loss(D(src, fake), real) + pixel_loss(fake, real)`` (L1, ``loss_weight: 100`` = lambda_L1).
    Predict: ``fake_img`` (the translation), ``gt_img`` (the target, when in the batch), ``real_A``, ``real_B``.
    Export: ``img`` [B, 3, H, W] in [-1, 1] (the source) -> translation.
    """

    def __init__(self, generator: dict, discriminator: dict | None = None, pixel_loss: dict | None = None,
                 direction: str = "AtoB", **kwargs) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"Pix2Pix.direction: expected one of {list(DIRECTIONS)}, got {direction!r}")
        super().__init__(generator, discriminator, **kwargs)
        self.direction = direction
        self.pixel_loss = MODELS.build(pixel_loss or {"type": "L1Loss", "loss_weight": 100.0})

    @property
    def keys(self) -> tuple[str, str]:
        """(source key, target key) of the batch."""
        return ("img_A", "img_B") if self.direction == "AtoB" else ("img_B", "img_A")

    def generate(self, inputs: Tensors) -> Tensors:
        src = self.require(inputs, self.keys[0], "Pix2Pix")
        return {"fake": self.generator(src)}

    def discriminator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        src, real = inputs[self.keys[0]], self.require(inputs, self.keys[1], "Pix2Pix")
        d_real = self.discriminator(torch.cat([src, real], dim=1))
        d_fake = self.discriminator(torch.cat([src, outputs["fake"]], dim=1))
        return {"loss_disc_real": 0.5 * self.gan_loss(d_real, True, is_disc=True),
                "loss_disc_fake": 0.5 * self.gan_loss(d_fake, False, is_disc=True)}

    def generator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        src, real, fake = inputs[self.keys[0]], inputs[self.keys[1]], outputs["fake"]
        pred = self.discriminator(torch.cat([src, fake], dim=1))
        return {"loss_gen_adv": self.gan_loss(pred, True, is_disc=False), "loss_pixel": self.pixel_loss(fake, real)}

    def export_feeds(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """``img``: the source image (``inputs[keys[0]]``)."""
        return {"img": self.require(inputs, self.keys[0], "Pix2Pix")}

    def predict_images(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        tgt_key = self.keys[1]
        out = {"fake_img": self.export_forward(self.export_feeds(inputs, data_samples))}
        for key, field in (("img_A", "real_A"), ("img_B", "real_B")):
            if key in inputs:
                out[field] = inputs[key]
        if tgt_key in inputs:
            out["gt_img"] = inputs[tgt_key]
        return out

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        src = inputs["img"] if "img" in inputs else self.require(inputs, self.keys[0], "Pix2Pix")
        return self.sampling_generator(src)

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 256) -> Tensors:
        h, w = self.image_size(img_size)
        return {"img": torch.zeros(batch, 3, h, w)}
