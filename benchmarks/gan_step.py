"""GAN cases of benchmarks/train_step.py: pix2pix and CycleGAN at their full size, 1 x 256 x 256.

The oars side is ``model.train_step(batch, optim_wrapper_dict)`` (data preprocessor, the discriminator step with the
generator frozen, the generator step with the discriminator frozen, loss dicts checked and logged, two optimizer
wrappers). The bare side does the same G and D updates on the same modules in plain PyTorch: the paper's losses
written out with ``torch.nn.functional`` on the pre-processed batch, two Adam optimizers, ``requires_grad_`` flipped
by hand, no pools (CycleGAN's history pool is a copy of one image).

    python benchmarks/train_step.py --model pix2pix|cyclegan [--repeats 10] [--size 256] [--device cpu|cuda]
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmarks.common import ROOT

GAN_CONFIGS = {
    "pix2pix": os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_facades.yaml"),
    "cyclegan": os.path.join(ROOT, "configs/gan/cyclegan/cyclegan_horse2zebra.yaml"),
}
GAN_NAMES = {"pix2pix": "pix2pix (U-Net-256 + 70x70 PatchGAN)", "cyclegan": "CycleGAN (2 x ResNet-9 + 2 x PatchGAN)"}


def build_gan(key: str, device: str):
    """The full-size model of the config (train mode) and its OptimWrapperDict (the config's Adam settings)."""
    from mmengine.registry import DefaultScope

    from gan.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS
    from oars.config import load_config

    cfg = load_config(GAN_CONFIGS[key])
    with DefaultScope.overwrite_default_scope("gan"):
        model = MODELS.build(copy.deepcopy(cfg.model)).to(device).train()
        model.init_weights()
        wrapper_cfg = {k: v for k, v in cfg.optim_wrapper.items() if k != "constructor"}
        wrappers = OPTIM_WRAPPER_CONSTRUCTORS.build(
            {"type": "MultiOptimWrapperConstructor", "optim_wrapper_cfg": wrapper_cfg})(model)
    return model, wrappers


def gan_batch(size: int, batch: int) -> dict:
    """``batch`` uint8 RGB pairs (img_A, img_B) as the data loader delivers them."""
    from gan.structures import GANDataSample

    g = torch.Generator().manual_seed(0)
    inputs = {k: [torch.randint(0, 256, (3, size, size), generator=g, dtype=torch.uint8) for _ in range(batch)]
              for k in ("img_A", "img_B")}
    return {"inputs": inputs, "data_samples": [GANDataSample(metainfo={"sample_idx": i}) for i in range(batch)]}


def _adam(params, lr: float = 2e-4) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, betas=(0.5, 0.999))


def _step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    loss.backward()
    opt.step()
    opt.zero_grad()


def _frozen(net: torch.nn.Module, frozen: bool) -> None:
    for p in net.parameters():
        p.requires_grad_(not frozen)


def bare_pix2pix(model, real_a: torch.Tensor, real_b: torch.Tensor) -> Callable[[], None]:
    """pix2pix's iteration: D on (A, B) vs (A, G(A)) with BCE, halved; G: BCE(D(A, G(A)), 1) + 100 L1."""
    g, d = model.generator, model.discriminator
    g_opt, d_opt = _adam(g.parameters()), _adam(d.parameters())

    def step() -> None:
        fake = g(real_a)
        _frozen(g, True)
        d_real, d_fake = d(torch.cat([real_a, real_b], 1)), d(torch.cat([real_a, fake.detach()], 1))
        d_loss = 0.5 * (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                        + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
        _step(d_opt, d_loss)
        _frozen(g, False)
        _frozen(d, True)
        pred = d(torch.cat([real_a, fake], 1))
        g_loss = F.binary_cross_entropy_with_logits(pred, torch.ones_like(pred)) + 100 * F.l1_loss(fake, real_b)
        _step(g_opt, g_loss)
        _frozen(d, False)

    return step


def bare_cyclegan(model, real_a: torch.Tensor, real_b: torch.Tensor) -> Callable[[], None]:
    """CycleGAN's iteration (LSGAN): G_a2b(A), G_b2a(B), the reconstructions and identities; D_A and D_B on real vs
    fake, halved; G: adversarial + 10 x cycle + 5 x identity."""
    g, d = model.generator, model.discriminator
    g_opt, d_opt = _adam(g.parameters()), _adam(d.parameters())

    def mse(pred: torch.Tensor, real: bool) -> torch.Tensor:
        return F.mse_loss(pred, torch.ones_like(pred) if real else torch.zeros_like(pred))

    def step() -> None:
        fake_b, fake_a = g["a2b"](real_a), g["b2a"](real_b)
        rec_a, rec_b = g["b2a"](fake_b), g["a2b"](fake_a)
        idt_b, idt_a = g["a2b"](real_b), g["b2a"](real_a)
        _frozen(g, True)
        d_loss = 0.5 * (mse(d["A"](real_a), True) + mse(d["A"](fake_a.detach()), False)
                        + mse(d["B"](real_b), True) + mse(d["B"](fake_b.detach()), False))
        _step(d_opt, d_loss)
        _frozen(g, False)
        _frozen(d, True)
        g_loss = (mse(d["B"](fake_b), True) + mse(d["A"](fake_a), True)
                  + 10 * (F.l1_loss(rec_a, real_a) + F.l1_loss(rec_b, real_b))
                  + 5 * (F.l1_loss(idt_b, real_b) + F.l1_loss(idt_a, real_a)))
        _step(g_opt, g_loss)
        _frozen(d, False)

    return step


def gan_steps(key: str, size: int, batch: int, device: str) -> tuple[dict[str, Callable[[], None]], str]:
    """``{'bare': ..., 'oars': ...}`` steps on the same modules and batch, and the case's title."""
    model, wrappers = build_gan(key, device)
    data = gan_batch(size, batch)
    prepared = model.data_preprocessor(copy.deepcopy(data), True)["inputs"]
    real_a, real_b = prepared["img_A"], prepared["img_B"]
    bare = (bare_pix2pix if key == "pix2pix" else bare_cyclegan)(model, real_a, real_b)

    def oars() -> None:
        model.train_step(data, wrappers)

    return {"bare": bare, "oars": oars}, f"{GAN_NAMES[key]}, {batch}x3x{size}x{size}, {device}"
