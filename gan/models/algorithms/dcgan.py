"""DCGAN (Radford et al. 2015): images from noise; with ``gan_type: wgan`` + ``gradient_penalty`` + ``n_critic: 5``
it is WGAN-GP."""

from __future__ import annotations

import torch

from gan.registry import MODELS

from ..base_gan import BaseGAN, Tensors


def seeded_noise(samples: list | None, batch: int, noise_size: int, device: torch.device) -> torch.Tensor:
    """[batch, noise_size] N(0, 1) noise, row i drawn from a generator seeded with sample i's metainfo ``seed``
    (else its ``sample_idx``, else i): the same sample gives the same image in every evaluation, whatever the
    batch size, and the global random state is untouched."""
    rows = []
    for i in range(batch):
        meta = samples[i].metainfo if samples is not None and i < len(samples) else {}
        seed = int(meta.get("seed", meta.get("sample_idx", i)))
        gen = torch.Generator().manual_seed(seed)
        rows.append(torch.randn(noise_size, generator=gen))
    return torch.stack(rows).to(device)


@MODELS.register_module()
class DCGAN(BaseGAN):
    """Unconditional GAN on ``inputs['img']`` (the real images).

    Training: fresh N(0, 1) noise [B, noise_size] per iteration (torch's generator); D: ``gan_loss(D(real), real) +
    gan_loss(D(fake), fake)`` (+ the gradient penalty when configured); G: ``gan_loss(D(fake), real)``.
    Predict: ``fake_img`` from noise seeded per sample (:func:`seeded_noise`), or ``inputs['noise']`` when given,
    and ``gt_img`` when the batch has real images. Export: ``noise`` [B, noise_size] -> images.

    Args:
        noise_size: z dimension; passed to the generator (``noise_size``) unless its config sets it.
        gradient_penalty: ``{type: GradientPenaltyLoss, loss_weight: 10}`` or None.
    """

    def __init__(self, generator: dict, discriminator: dict | None = None, noise_size: int = 100,
                 gradient_penalty: dict | None = None, **kwargs) -> None:
        self.noise_size = int(noise_size)
        super().__init__(generator, discriminator, **kwargs)
        self.gradient_penalty = None if gradient_penalty is None else MODELS.build(gradient_penalty)

    def build_networks(self, generator: dict, discriminator: dict | None) -> None:
        self.generator = MODELS.build(generator, default_args=self.generator_defaults())
        self.discriminator = None if discriminator is None else MODELS.build(
            discriminator, default_args=self.discriminator_defaults())

    def generator_defaults(self) -> dict:
        return {"noise_size": self.noise_size}

    def discriminator_defaults(self) -> dict:
        return {}

    def conditions(self, inputs: Tensors, samples: list | None = None, batch: int | None = None) -> tuple:
        """Extra arguments of G and D after the image/noise (none here; CGAN's label)."""
        return ()

    def generate(self, inputs: Tensors) -> Tensors:
        real = self.require(inputs, "img", type(self).__name__)
        noise = torch.randn(real.shape[0], self.noise_size, device=real.device)
        return {"fake": self.generator(noise, *self.conditions(inputs))}

    def discriminator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        real, fake, cond = inputs["img"], outputs["fake"], self.conditions(inputs)
        losses = {"loss_disc_real": self.gan_loss(self.discriminator(real, *cond), True, is_disc=True),
                  "loss_disc_fake": self.gan_loss(self.discriminator(fake, *cond), False, is_disc=True)}
        if self.gradient_penalty is not None:
            losses["loss_gp"] = self.gradient_penalty(lambda x: self.discriminator(x, *cond), real, fake)
        return losses

    def generator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        pred = self.discriminator(outputs["fake"], *self.conditions(inputs))
        return {"loss_gen_adv": self.gan_loss(pred, True, is_disc=False)}

    def export_feeds(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """``noise`` (``inputs['noise']``, else :func:`seeded_noise`) and, for a conditional model, ``label``."""
        batch = len(data_samples) if data_samples else self.batch_size(inputs)
        noise = inputs.get("noise")
        if noise is None:
            noise = seeded_noise(data_samples, batch, self.noise_size, self.train_iter.device)
        feeds = {"noise": noise}
        conditions = self.conditions(inputs, data_samples, batch)
        if conditions:
            feeds["label"] = conditions[0]
        return feeds

    def predict_images(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        out = {"fake_img": self.export_forward(self.export_feeds(inputs, data_samples))}
        if "img" in inputs:
            out["gt_img"] = inputs["img"]
        return out

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        return self.sampling_generator(inputs["noise"], *self.conditions(inputs))

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 64) -> Tensors:
        return {"noise": torch.randn(batch, self.noise_size)}
