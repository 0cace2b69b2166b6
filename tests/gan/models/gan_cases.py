"""Shrunk GAN models and synthetic batches shared by the gan model tests."""

from __future__ import annotations

import torch
from mmengine.optim import OptimWrapperDict

from gan.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS
from gan.structures import GANDataSample

ADAM = {"optimizer": {"type": "Adam", "lr": 2e-4, "betas": [0.5, 0.999]}}
SIZE = 32


def small_model(kind: str, **extra) -> torch.nn.Module:
    """The model of ``kind`` at ngf/ndf 8 and 32 px (the real architectures, narrow)."""
    if kind == "DCGAN":
        cfg = {"type": "DCGAN", "noise_size": 16,
               "generator": {"type": "DCGANGenerator", "ngf": 8, "output_size": SIZE},
               "discriminator": {"type": "DCGANDiscriminator", "ndf": 8, "input_size": SIZE}}
    elif kind == "CGAN":
        cfg = {"type": "CGAN", "noise_size": 16, "num_classes": 4,
               "generator": {"type": "DCGANGenerator", "ngf": 8, "output_size": 28},
               "discriminator": {"type": "DCGANDiscriminator", "ndf": 8, "input_size": 28}}
    elif kind == "Pix2Pix":
        cfg = {"type": "Pix2Pix", "generator": {"type": "UNetGenerator", "ngf": 8, "num_downs": 5},
               "discriminator": {"type": "PatchDiscriminator", "in_channels": 6, "ndf": 8},
               "pixel_loss": {"type": "L1Loss", "loss_weight": 100.0}}
    elif kind == "CycleGAN":
        cfg = {"type": "CycleGAN", "pool_size": 3, "gan_loss": {"type": "GANLoss", "gan_type": "lsgan"},
               "generator": {"type": "ResnetGenerator", "ngf": 8, "num_blocks": 2},
               "discriminator": {"type": "PatchDiscriminator", "ndf": 8, "norm": "IN"},
               "cycle_loss": {"type": "L1Loss", "loss_weight": 10.0},
               "identity_loss": {"type": "L1Loss", "loss_weight": 5.0}}
    else:
        raise KeyError(kind)
    cfg.update(extra)
    model = MODELS.build(cfg)
    model.init_weights()
    return model


def optim_wrappers(model: torch.nn.Module, **overrides) -> OptimWrapperDict:
    cfg = {"generator": dict(ADAM), "discriminator": dict(ADAM), **overrides}
    return OPTIM_WRAPPER_CONSTRUCTORS.build({"type": "MultiOptimWrapperConstructor", "optim_wrapper_cfg": cfg})(model)


def batch(kind: str, n: int = 2, seed: int = 0) -> dict:
    """A collated batch as PackGANInputs + pseudo_collate give it: uint8 [3, S, S] images per key."""
    gen = torch.Generator().manual_seed(seed)
    size = 28 if kind == "CGAN" else SIZE

    def img():
        return torch.randint(0, 256, (3, size, size), generator=gen, dtype=torch.uint8)

    inputs: dict = {}
    if kind in ("DCGAN", "CGAN"):
        inputs["img"] = [img() for _ in range(n)]
    else:
        inputs["img_A"] = [img() for _ in range(n)]
        inputs["img_B"] = [img() for _ in range(n)]
    if kind == "CGAN":
        inputs["label"] = [torch.tensor(i % 4) for i in range(n)]
    samples = [GANDataSample(metainfo={"sample_idx": i, "img_path": f"img_{i}.png"}) for i in range(n)]
    return {"inputs": inputs, "data_samples": samples}


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def unchanged(before: dict[str, torch.Tensor], module: torch.nn.Module) -> bool:
    """Whether every parameter of ``module`` equals its value in ``before`` (norm statistics are not compared:
    a forward in training mode updates them)."""
    return all(torch.equal(before[k], p) for k, p in module.named_parameters())
