"""Every GAN of the task, shrunk (ngf/ndf 8, 28-32 px): train_step on a real OptimWrapperDict with each network's
step leaving the other network untouched, the n_critic cadence, EMA, predict and the exported tensor forward."""

from __future__ import annotations

import pytest
import torch
from gan_cases import SIZE, batch, optim_wrappers, small_model, snapshot, unchanged

from gan.models.utils import GeneratorEMA
from gan.structures import GANDataSample
from oars.engine.hooks.nan_guard_hook import NonFiniteLossError

KINDS = ["DCGAN", "CGAN", "Pix2Pix", "CycleGAN"]


def _watch_steps(model, wrappers) -> list[str]:
    """Wrap each wrapper's update_params: the stepping network must change and the other one must not (and, in the
    generator step, the discriminator must not collect gradients)."""
    done = []
    for name, other in (("discriminator", model.generator), ("generator", model.discriminator)):
        wrapper = wrappers[name]
        own = getattr(model, name)
        original = wrapper.update_params

        def update(loss, _orig=original, _name=name, _own=own, _other=other, **kw):
            other_before, own_before = snapshot(_other), snapshot(_own)
            _orig(loss, **kw)
            assert unchanged(other_before, _other), f"{_name} step changed the other network"
            assert not unchanged(own_before, _own), f"{_name} step did not change the {_name}"
            assert all(p.grad is None or not p.grad.any() for p in _other.parameters()), _name
            done.append(_name)

        wrapper.update_params = update
    return done


@pytest.mark.parametrize("kind", KINDS)
def test_train_predict_tensor(kind):
    torch.manual_seed(0)
    model = small_model(kind, ema_config={"momentum": 0.5}) if kind == "DCGAN" else small_model(kind)
    wrappers = optim_wrappers(model)
    done = _watch_steps(model, wrappers)
    data = batch(kind)
    for _ in range(2):
        log = model.train_step(data, wrappers)
    assert done == ["discriminator", "generator"] * 2
    assert int(model.train_iter) == 2
    assert {"loss_disc", "loss_gen"} <= set(log) and all(torch.isfinite(v) for v in log.values())
    if kind == "CycleGAN":
        assert {"loss_cycle_A", "loss_idt_B", "loss_disc_B_fake"} <= set(log)
        assert model.fake_A_pool.num_images == 3  # 2 + 2 queried, capped at pool_size

    model.eval()
    samples = model.val_step(batch(kind))
    size = 28 if kind == "CGAN" else SIZE
    assert len(samples) == 2 and isinstance(samples[0], GANDataSample)
    fake = samples[0].fake_img
    assert fake.shape == (3, size, size) and fake.dtype == torch.float32 and 0 <= fake.min() <= fake.max() <= 255
    gt_field = {"DCGAN": "gt_img", "CGAN": "gt_img", "Pix2Pix": "real_A", "CycleGAN": "fake_B_to_A"}[kind]
    assert samples[1].get(gt_field).shape == (3, size, size)
    if kind == "Pix2Pix":  # the target, denormalised back to the uint8 values exactly
        assert torch.allclose(samples[0].gt_img, batch(kind)["inputs"]["img_B"][0].float(), atol=1e-4)

    example = model.export_inputs(2, size)
    with torch.no_grad():
        out = model(example, mode="tensor")
    assert out.shape == (2, 3, size, size) and out.abs().max() <= 1
    if kind in ("Pix2Pix", "CycleGAN"):  # the exported graph is the prediction's generator
        pre = model.data_preprocessor(batch(kind), False)["inputs"]
        with torch.no_grad():
            exported = model({"img": pre["img_A"]}, mode="tensor")
        assert torch.allclose(model.data_preprocessor.destruct(exported)[0], samples[0].fake_img, atol=1e-3)


def test_seeded_prediction_is_per_sample():
    """DCGAN's predict draws each sample's noise from its own seed: the same sample, alone or in a batch, gives the
    same image; different samples differ; the global random state is untouched."""
    model = small_model("DCGAN").eval()
    two = model.val_step(batch("DCGAN"))
    one = batch("DCGAN", n=1)
    one["data_samples"][0].set_metainfo({"sample_idx": 1})
    state = torch.get_rng_state()
    alone = model.val_step(one)
    assert torch.equal(state, torch.get_rng_state())
    assert torch.allclose(alone[0].fake_img, two[1].fake_img, atol=1e-4)
    assert not torch.allclose(two[0].fake_img, two[1].fake_img)


def test_n_critic_cadence_and_ema():
    """n_critic 2: the generator steps at iterations 2, 4, ... only; EMA (momentum 0.5 kept) equals the generator
    after its first update and averages after that; predict and export use the EMA generator."""
    torch.manual_seed(1)
    model = small_model("DCGAN", n_critic=2, ema_config={"momentum": 0.5})
    assert isinstance(model.generator_ema, GeneratorEMA)
    wrappers = optim_wrappers(model)
    data = batch("DCGAN")
    g0 = snapshot(model.generator)
    model.train_step(data, wrappers)
    assert unchanged(g0, model.generator)
    model.train_step(data, wrappers)
    g1 = snapshot(model.generator)
    assert not unchanged(g0, model.generator)
    ema = model.generator_ema.module
    assert unchanged(g1, ema)  # the first update copies
    model.train_step(data, wrappers)
    model.train_step(data, wrappers)
    g2 = snapshot(model.generator)
    key = "net.0.weight"
    assert torch.allclose(ema.state_dict()[key], 0.5 * g1[key] + 0.5 * g2[key], atol=1e-7)
    model.eval()
    noise = model.export_inputs(2)
    with torch.no_grad():
        assert torch.equal(model(noise, mode="tensor"), ema(noise["noise"]))
        assert not torch.allclose(model(noise, mode="tensor"), model.generator(noise["noise"]))


def test_non_finite_loss_stops_before_the_step():
    model = small_model("DCGAN")
    wrappers = optim_wrappers(model)
    with torch.no_grad():
        model.discriminator.net[0].weight.fill_(float("nan"))
    g_before = snapshot(model.generator)
    with pytest.raises(NonFiniteLossError, match=r"iteration 1 in the discriminator step, first in loss_disc_real"):
        model.train_step(batch("DCGAN"), wrappers)
    assert unchanged(g_before, model.generator)
    assert int(model.train_iter) == 0


def test_bad_optim_wrapper_keys():
    model = small_model("DCGAN")
    with pytest.raises(ValueError, match="has no submodule 'generater'"):
        optim_wrappers(model, generater={"optimizer": {"type": "Adam", "lr": 1e-3}})
    with pytest.raises(TypeError, match="needs an OptimWrapperDict"):
        model.train_step(batch("DCGAN"), optim_wrappers(model)["generator"])
