"""Conditional GAN (Mirza & Osindero 2014) with DCGAN networks: the class label conditions both networks."""

from __future__ import annotations

import torch

from gan.registry import MODELS

from ..base_gan import Tensors
from .dcgan import DCGAN


@MODELS.register_module()
class CGAN(DCGAN):
    """DCGAN whose generator gets noise ++ one-hot(label) and whose discriminator gets image ++ label maps.

    ``num_classes`` is given once, here, and passed to both networks. Training labels are the batch's
    (``inputs['label']``, int64 [B]); the fakes of a batch are drawn for the same labels. Predict: ``inputs['label']``
    when the batch has it, else each data sample's metainfo ``label``, else ``i % num_classes`` (a class sweep).
    Export: ``noise`` [B, noise_size] and ``label`` [B] int64.
    """

    def __init__(self, generator: dict, discriminator: dict | None = None, num_classes: int = 10, **kwargs) -> None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"CGAN.num_classes: expected a whole number >= 1, got {num_classes!r}")
        self.num_classes = num_classes
        super().__init__(generator, discriminator, **kwargs)

    def generator_defaults(self) -> dict:
        return {"noise_size": self.noise_size, "num_classes": self.num_classes}

    def discriminator_defaults(self) -> dict:
        return {"num_classes": self.num_classes}

    def conditions(self, inputs: Tensors, samples: list | None = None, batch: int | None = None) -> tuple:
        if "label" in inputs:
            label = inputs["label"].long().reshape(-1)
        elif batch is not None:  # predict without labels in the batch
            label = torch.tensor([int(samples[i].metainfo.get("label", i % self.num_classes)) if samples else
                                  i % self.num_classes for i in range(batch)], device=self.train_iter.device)
        else:
            raise ValueError("CGAN: the batch has no inputs['label'] (int64 [B] class ids); the dataset pipeline's "
                             "PackGANInputs must pack it")
        if label.numel() and (int(label.min()) < 0 or int(label.max()) >= self.num_classes):
            raise ValueError(f"CGAN: labels {label.tolist()} outside [0, {self.num_classes}) (num_classes)")
        return (label,)

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        # no range check in the graph: the exported model trusts its caller's labels
        return self.sampling_generator(inputs["noise"], inputs["label"])

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 28) -> Tensors:
        return {"noise": torch.randn(batch, self.noise_size),
                "label": torch.arange(batch, dtype=torch.long) % self.num_classes}
