"""CycleGAN (Zhu et al. 2017): unpaired translation between domains A and B with cycle consistency."""

from __future__ import annotations

import copy

import torch
from torch import nn

from gan.registry import MODELS

from ..base_gan import BaseGAN, Tensors
from ..utils import ImagePool
from .pix2pix import DIRECTIONS


@MODELS.register_module()
class CycleGAN(BaseGAN):
    """Two generators and two discriminators, built from one config each.

    Networks: ``generator`` is a ModuleDict ``{a2b: G_A->B, b2a: G_B->A}`` and ``discriminator`` ``{A: judges
    domain A, B: judges domain B}``, so the optimizer keys ``generator`` and ``discriminator`` train both of a kind
    (one Adam each, as the paper's ``itertools.chain``); checkpoint keys read ``generator.a2b.*``,
    ``discriminator.B.*``.

    Losses (LSGAN in the paper): D_X: ``0.5 * (gan(D_X(real X), real) + gan(D_X(pool_X(fake X)), fake))``, the fakes
    drawn through a history pool of ``pool_size`` images per domain; G: ``gan(D_B(G_a2b(A)), real) +
    gan(D_A(G_b2a(B)), real) + cycle(G_b2a(G_a2b(A)), A) + cycle(G_a2b(G_b2a(B)), B)`` (+ identity terms
    ``identity(G_a2b(B), B) + identity(G_b2a(A), A)``). The paper's lambda 10 and identity 0.5 are
    ``cycle_loss.loss_weight: 10`` and ``identity_loss.loss_weight: 5`` (0.5 * 10); ``identity_loss: null`` drops
    the identity terms (and their two generator passes).

    Predict: ``fake_img`` in ``direction`` (AtoB: G_a2b(A)), ``real_A`` / ``real_B`` as given, and the other way
    (``fake_B_to_A``, or ``fake_A_to_B`` for BtoA) when the batch has both domains. Export: ``img`` -> translation
    in ``direction``.
    """

    unexported_fields = ("fake_B_to_A", "fake_A_to_B")  # the other direction's generator is not in the export

    def __init__(self, generator: dict, discriminator: dict | None = None, cycle_loss: dict | None = None,
                 identity_loss: dict | None = None, pool_size: int = 50, direction: str = "AtoB", **kwargs) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"CycleGAN.direction: expected one of {list(DIRECTIONS)}, got {direction!r}")
        super().__init__(generator, discriminator, **kwargs)
        self.direction = direction
        self.cycle_loss = MODELS.build(cycle_loss or {"type": "L1Loss", "loss_weight": 10.0})
        self.identity_loss = None if identity_loss is None else MODELS.build(identity_loss)
        self.fake_A_pool = ImagePool(pool_size)
        self.fake_B_pool = ImagePool(pool_size)

    def build_networks(self, generator: dict, discriminator: dict | None) -> None:
        self.generator = nn.ModuleDict({k: MODELS.build(copy.deepcopy(generator)) for k in ("a2b", "b2a")})
        self.discriminator = None if discriminator is None else nn.ModuleDict(
            {k: MODELS.build(copy.deepcopy(discriminator)) for k in ("A", "B")})

    def generate(self, inputs: Tensors) -> Tensors:
        real_a = self.require(inputs, "img_A", "CycleGAN")
        real_b = self.require(inputs, "img_B", "CycleGAN")
        g = self.generator
        out = {"fake_B": g["a2b"](real_a), "fake_A": g["b2a"](real_b)}
        if torch.is_grad_enabled():  # only the generator step needs the reconstructions and identities
            out["rec_A"], out["rec_B"] = g["b2a"](out["fake_B"]), g["a2b"](out["fake_A"])
            if self.identity_loss is not None:
                out["idt_B"], out["idt_A"] = g["a2b"](real_b), g["b2a"](real_a)
        return out

    def discriminator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        d, losses = self.discriminator, {}
        for dom, pool in (("A", self.fake_A_pool), ("B", self.fake_B_pool)):
            fake = pool.query(outputs[f"fake_{dom}"]) if self.training else outputs[f"fake_{dom}"]
            losses[f"loss_disc_{dom}_real"] = 0.5 * self.gan_loss(d[dom](inputs[f"img_{dom}"]), True, is_disc=True)
            losses[f"loss_disc_{dom}_fake"] = 0.5 * self.gan_loss(d[dom](fake), False, is_disc=True)
        return losses

    def generator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        d, losses = self.discriminator, {}
        if "rec_A" not in outputs:
            raise RuntimeError("CycleGAN.generator_losses needs the outputs of generate() run with gradients on")
        for dom in ("A", "B"):
            losses[f"loss_gen_adv_{dom}"] = self.gan_loss(d[dom](outputs[f"fake_{dom}"]), True, is_disc=False)
            losses[f"loss_cycle_{dom}"] = self.cycle_loss(outputs[f"rec_{dom}"], inputs[f"img_{dom}"])
            if self.identity_loss is not None:
                losses[f"loss_idt_{dom}"] = self.identity_loss(outputs[f"idt_{dom}"], inputs[f"img_{dom}"])
        return losses

    def export_feeds(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """``img``: the source domain's image (``img_A`` for ``AtoB``, else ``img_B``)."""
        src = "img_A" if self.direction == "AtoB" else "img_B"
        return {"img": self.require(inputs, src, "CycleGAN")}

    def predict_images(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        g = self.sampling_generator
        out = {"fake_img": self.export_forward(self.export_feeds(inputs, data_samples))}
        for key, field in (("img_A", "real_A"), ("img_B", "real_B")):
            if key in inputs:
                out[field] = inputs[key]
        if "img_A" in inputs and "img_B" in inputs:
            if self.direction == "AtoB":
                out["fake_B_to_A"] = g["b2a"](inputs["img_B"])
            else:
                out["fake_A_to_B"] = g["a2b"](inputs["img_A"])
        return out

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        src, name = ("img_A", "a2b") if self.direction == "AtoB" else ("img_B", "b2a")
        img = inputs["img"] if "img" in inputs else self.require(inputs, src, "CycleGAN")
        return self.sampling_generator[name](img)

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 256) -> Tensors:
        h, w = self.image_size(img_size)
        return {"img": torch.zeros(batch, 3, h, w)}
