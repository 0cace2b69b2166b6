"""GAN parts against hand-computed values: the four adversarial losses, the gradient penalty of a linear critic,
the history pool (and its exact restore), the preprocessor, the networks' published sizes and the 70x70 PatchGAN."""

from __future__ import annotations

import math

import pytest
import torch

from gan.models import (
    ClassificationLoss,
    DCGANDiscriminator,
    DCGANGenerator,
    GANDataPreprocessor,
    GANLoss,
    GradientPenaltyLoss,
    ImagePool,
    PatchDiscriminator,
    ResnetGenerator,
    UNetGenerator,
)


def test_gan_loss_types():
    pred = torch.tensor([[-1.0], [0.5], [2.0]])
    sig = torch.sigmoid(pred)
    vanilla = GANLoss("vanilla", loss_weight=2.0)
    assert torch.isclose(vanilla(pred, True, is_disc=True), -torch.log(sig).mean())
    assert torch.isclose(vanilla(pred, False, is_disc=True), -torch.log(1 - sig).mean())
    assert torch.isclose(vanilla(pred, True), -2 * torch.log(sig).mean())  # loss_weight: generator only
    smooth = GANLoss("lsgan", real_label=0.9)
    assert torch.isclose(smooth(pred, True, is_disc=True), ((pred - 0.9) ** 2).mean())
    assert torch.isclose(smooth(pred, False, is_disc=True), (pred ** 2).mean())
    wgan = GANLoss("wgan")
    assert torch.isclose(wgan(pred, True, is_disc=True), -pred.mean())
    assert torch.isclose(wgan(pred, False, is_disc=True), pred.mean())
    hinge = GANLoss("hinge")
    assert torch.isclose(hinge(pred, True, is_disc=True), torch.tensor((2.0 + 0.5 + 0.0) / 3))
    assert torch.isclose(hinge(pred, False, is_disc=True), torch.tensor((0.0 + 1.5 + 3.0) / 3))
    assert torch.isclose(hinge(pred, True), -pred.mean())
    with pytest.raises(ValueError, match="gan_type"):
        GANLoss("lsgann")


def test_gradient_penalty_of_a_linear_critic():
    """D(x) = w.x + b has gradient w everywhere: penalty = weight * (||w|| - 1)^2 exactly, with a graph giving
    d/dw = weight * 2 (||w|| - 1) w / ||w||; the same in float32 under bfloat16 autocast."""
    torch.manual_seed(0)
    critic = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 1))
    real, fake = torch.randn(5, 3, 4, 4), torch.randn(5, 3, 4, 4)
    w = critic[1].weight
    norm = w.detach().norm()
    gp = GradientPenaltyLoss(loss_weight=10.0)
    loss = gp(critic, real, fake)
    assert loss.dtype == torch.float32
    assert torch.isclose(loss, 10 * (norm - 1) ** 2, rtol=1e-5)
    loss.backward()
    assert torch.allclose(w.grad, 10 * 2 * (norm - 1) * w.detach() / norm, rtol=1e-4, atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        amp = gp(critic, real, fake)
    assert amp.dtype == torch.float32 and torch.isclose(amp, loss.detach(), rtol=1e-5)


def test_classification_loss_is_bce_summed_over_attributes():
    logits, targets = torch.tensor([[0.3, -1.0, 2.0], [1.0, 0.0, -0.5]]), torch.tensor([[1.0, 0, 1], [0, 1, 0]])
    expected = sum(-math.log(torch.sigmoid(torch.tensor(x if t else -x)).item())
                   for row, trow in zip(logits.tolist(), targets.tolist()) for x, t in zip(row, trow)) / 2
    assert math.isclose(ClassificationLoss(loss_weight=1.0)(logits, targets).item(), expected, rel_tol=1e-5)


def test_image_pool_fills_swaps_and_restores_exactly():
    pool = ImagePool(pool_size=4)
    first = torch.arange(3.0).view(3, 1, 1, 1).expand(3, 1, 2, 2)
    assert torch.equal(pool.query(first), first) and pool.num_images == 3
    second = torch.arange(10.0, 13.0).view(3, 1, 1, 1).expand(3, 1, 2, 2)
    torch.manual_seed(3)
    out = pool.query(second)
    # the first image of the batch fills the pool; the other two are returned, or swapped with a stored one
    assert pool.num_images == 4 and out[0, 0, 0, 0] == 10
    seen = set(pool.images[:, 0, 0, 0].tolist()) | set(out[:, 0, 0, 0].tolist())
    assert seen == {0.0, 1.0, 2.0, 10.0, 11.0, 12.0}
    assert sorted(pool.images[:, 0, 0, 0].tolist() + out[1:, 0, 0, 0].tolist()) == [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
    # swaps happen about half the time once full
    swaps = sum(int(not torch.equal(pool.query(torch.full((1, 1, 2, 2), 99.0 + i)), torch.full((1, 1, 2, 2),
                                                                                                 99.0 + i)))
                for i in range(200))
    assert 70 < swaps < 130
    # restore: a pool loaded from the state dict answers exactly as the original under the same random state
    restored = ImagePool(pool_size=4)
    restored.load_state_dict(pool.state_dict())
    assert torch.equal(restored.images, pool.images)
    batch = torch.randn(6, 1, 2, 2)
    torch.manual_seed(7)
    a = pool.query(batch)
    torch.manual_seed(7)
    assert torch.equal(restored.query(batch), a) and torch.equal(restored.images, pool.images)
    assert ImagePool(0).query(batch) is not None and torch.equal(ImagePool(0).query(batch), batch)


def test_preprocessor_maps_to_minus_one_one_and_back():
    pre = GANDataPreprocessor()
    imgs = [torch.tensor([0, 51, 255], dtype=torch.uint8).view(3, 1, 1).expand(3, 2, 2).clone() for _ in range(2)]
    out = pre({"inputs": {"img_A": imgs, "label": [torch.tensor(1), torch.tensor(3)], "attrs": [torch.ones(2)] * 2},
               "data_samples": None})["inputs"]
    assert out["img_A"].shape == (2, 3, 2, 2) and out["img_A"].dtype == torch.float32
    assert torch.allclose(out["img_A"][0, :, 0, 0], torch.tensor([-1.0, 51 / 127.5 - 1, 1.0]))
    assert out["label"].tolist() == [1, 3] and out["label"].dtype == torch.int64 and out["attrs"].shape == (2, 2)
    assert torch.allclose(pre.destruct(out["img_A"]), torch.stack(imgs).float(), atol=1e-4)
    with pytest.raises(ValueError, match=r"inputs\['img'\] images differ in shape"):
        pre({"inputs": {"img": [torch.zeros(3, 4, 4), torch.zeros(3, 4, 6)]}})


def test_full_size_networks_have_the_published_parameter_counts():
    """PyTorch's DCGAN tutorial: G 3,576,704 / D 2,765,568 (64 px, nz 100, RGB); pix2pix's logs: unet_256 54.414 M,
    basic PatchGAN 2.769 M; CycleGAN's: resnet_9blocks 11.378 M."""
    def count(m):
        return sum(p.numel() for p in m.parameters())

    torch.set_default_device("meta")  # shapes only: no memory, no initialisation time
    try:
        assert count(DCGANGenerator()) == 3_576_704 and count(DCGANDiscriminator()) == 2_765_568
        assert round(count(UNetGenerator()) / 1e6, 3) == 54.414
        assert round(count(PatchDiscriminator(in_channels=6)) / 1e6, 3) == 2.769
        assert round(count(ResnetGenerator()) / 1e6, 3) == 11.378
    finally:
        torch.set_default_device(None)


def test_patchgan_30x30_output_and_70x70_receptive_field():
    d = PatchDiscriminator(in_channels=3, ndf=8, n_layers=3, norm="IN")
    x = torch.zeros(1, 3, 256, 256, requires_grad=True)
    out = d(x)
    assert out.shape == (1, 1, 30, 30) and PatchDiscriminator.receptive_field(3) == 70
    for m in d.modules():  # positive weights, no norm/activation: every input inside the field counts
        if isinstance(m, torch.nn.Conv2d):
            torch.nn.init.constant_(m.weight, 0.01)
    d = torch.nn.Sequential(*[m for m in d.net if not isinstance(m, (torch.nn.InstanceNorm2d, torch.nn.LeakyReLU))])
    x = torch.zeros(1, 3, 256, 256, requires_grad=True)
    d(x)[0, 0, 15, 15].backward()
    rows = x.grad[0, 0].abs().sum(1).nonzero()
    assert int(rows.max() - rows.min() + 1) == 70


def test_network_input_checks():
    with pytest.raises(ValueError, match="multiple of 2\\*\\*num_downs=32"):
        UNetGenerator(ngf=4, num_downs=5)(torch.zeros(1, 3, 48, 40))
    with pytest.raises(ValueError, match="output_size 30"):
        DCGANGenerator(output_size=30)
    with pytest.raises(ValueError, match="needs a label"):
        DCGANGenerator(ngf=4, output_size=28, num_classes=10)(torch.zeros(1, 100))
    g = DCGANGenerator(noise_size=8, ngf=4, output_size=28, num_classes=10)
    assert g(torch.zeros(2, 8), torch.tensor([0, 9])).shape == (2, 3, 28, 28)
