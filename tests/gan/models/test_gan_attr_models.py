"""StarGAN / AttGAN / STGAN shrunk (conv_dim 8, 32 px, 2-3 layers): train_step through BaseGAN on a real
OptimWrapperDict (the n_critic cadence, each step leaving the other network alone), predict (targets from the
batch, the metainfo or the one-attribute flip), the exported tensor forward; STU and head shapes; parameter counts
of the full-size networks against hand counts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gan_cases import optim_wrappers, snapshot, unchanged

from gan.models.algorithms.stargan import flip_one_attr
from gan.models.generators.stgan_generator import SelectiveTransferUnit
from gan.registry import MODELS
from gan.structures import GANDataSample

S = 32
CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "gan"
ATTRS = ("Black_Hair", "Blond_Hair", "Brown_Hair", "Male", "Young")


def small(kind: str, **extra) -> torch.nn.Module:
    """The model of ``kind`` at conv_dim 8 and 32 px, the real layer pattern with fewer layers."""
    if kind == "StarGAN":
        cfg = {"type": "StarGAN", "attr_names": list(ATTRS), "n_critic": 2,
               "generator": {"type": "StarGANGenerator", "conv_dim": 8, "num_blocks": 2},
               "discriminator": {"type": "StarGANDiscriminator", "conv_dim": 8, "num_layers": 3, "image_size": S}}
    else:
        gen = {"type": f"{kind}Generator", "conv_dim": 8, "num_layers": 3}
        if kind == "STGAN":
            gen.update(shortcut_layers=2, inject_layers=2, stu_layers=2, stu_inject_layers=2)
        cfg = {"type": kind, "attr_names": list(ATTRS), "n_critic": 2, "generator": gen,
               "discriminator": {"type": "AttGANDiscriminator", "conv_dim": 8, "num_layers": 3, "image_size": S,
                                 "fc_dim": 16}}
    cfg.update(extra)
    model = MODELS.build(cfg)
    model.init_weights()
    return model


def attr_batch(n: int = 2, seed: int = 0, **meta) -> dict:
    gen = torch.Generator().manual_seed(seed)
    attrs = [torch.tensor([1.0, 0, 0, 1, 0]), torch.tensor([0.0, 1, 0, 0, 1]), torch.tensor([0.0, 0, 1, 1, 1])]
    inputs = {"img": [torch.randint(0, 256, (3, S, S), generator=gen, dtype=torch.uint8) for _ in range(n)],
              "attrs": [attrs[i % 3] for i in range(n)]}
    samples = [GANDataSample(metainfo={"sample_idx": i, "img_path": f"{i}.jpg", "attr_names": ATTRS, **meta})
               for i in range(n)]
    return {"inputs": inputs, "data_samples": samples}


@pytest.mark.parametrize("kind", ["StarGAN", "AttGAN", "STGAN"])
def test_train_predict_tensor(kind):
    torch.manual_seed(0)
    model = small(kind)
    wrappers = optim_wrappers(model)
    steps = []
    for name, other in (("discriminator", model.generator), ("generator", model.discriminator)):
        original = wrappers[name].update_params

        def update(loss, _orig=original, _name=name, _other=other, **kw):
            before = snapshot(_other)
            _orig(loss, **kw)
            assert unchanged(before, _other), f"the {_name} step changed the other network"
            steps.append(_name)

        wrappers[name].update_params = update
    g0 = snapshot(model.generator)
    log = model.train_step(attr_batch(), wrappers)  # iteration 1 of n_critic 2: the critic only
    assert steps == ["discriminator"] and unchanged(g0, model.generator) and "loss_gen" not in log
    log = model.train_step(attr_batch(), wrappers)
    assert steps == ["discriminator", "discriminator", "generator"] and not unchanged(g0, model.generator)
    assert {"loss_disc_real", "loss_disc_fake", "loss_disc_cls", "loss_gp", "loss_gen_adv", "loss_gen_cls",
            "loss_rec"} <= set(log) and all(torch.isfinite(v) for v in log.values())

    model.eval()
    samples = model.val_step(attr_batch(3))
    fake = samples[0].fake_img
    assert fake.shape == (3, S, S) and fake.dtype == torch.float32 and 0 <= fake.min() <= fake.max() <= 255
    assert torch.allclose(samples[1].real_A, attr_batch(3)["inputs"]["img"][1].float(), atol=1e-3)
    # default targets: attribute sample_idx % K flipped (Black_Hair, Blond_Hair, Brown_Hair off)
    assert samples[0].target_attrs.tolist() == [0, 0, 0, 1, 0]
    assert samples[1].target_attrs.tolist() == [0, 0, 0, 0, 1]
    assert samples[2].target_attrs.tolist() == [0, 0, 0, 1, 1]
    assert samples[2].source_attrs.tolist() == [0, 0, 1, 1, 1]

    # metainfo targets win over the default, and the exported graph is the prediction's generator
    target = [1.0, 0, 0, 0, 1]
    given = model.val_step(attr_batch(2, target_attrs=target))
    assert torch.as_tensor(given[0].get("target_attrs")).tolist() == target
    pre = model.data_preprocessor(attr_batch(2), False)["inputs"]
    example = {"img": pre["img"], "attrs": torch.tensor([target, target])}
    if kind == "STGAN":
        example["src_attrs"] = pre["attrs"]
    with torch.no_grad():
        out = model(example, mode="tensor")
    assert out.shape == (2, 3, S, S) and out.abs().max() <= 1
    assert torch.allclose(model.data_preprocessor.destruct(out)[1], given[1].fake_img, atol=1e-3)
    assert not torch.allclose(given[0].fake_img, samples[0].fake_img)  # the target changes the output
    ex = model.export_inputs(2, S)
    assert set(ex) == ({"img", "attrs", "src_attrs"} if kind == "STGAN" else {"img", "attrs"})
    assert model(ex, mode="tensor").shape == (2, 3, S, S)


def test_attr_names_and_input_errors():
    model = small("StarGAN")
    wrappers = optim_wrappers(model)
    bad = attr_batch()
    bad["data_samples"][0].set_metainfo({"attr_names": ("Male", "Young")})
    with pytest.raises(ValueError, match=r"dataset's attributes \['Male', 'Young'\] differ"):
        model.train_step(bad, wrappers)
    bad = attr_batch()
    bad["inputs"]["attrs"] = [torch.zeros(3), torch.zeros(3)]
    with pytest.raises(ValueError, match=r"inputs\['attrs'\] must be \[B, K=5\]"):
        model.train_step(bad, wrappers)
    with pytest.raises(ValueError, match="has 2 values for the 5 attributes"):
        model.eval().val_step(attr_batch(1, target_attrs=[1, 0]))
    stgan = small("STGAN").eval()
    with pytest.raises(ValueError, match="needs the source attributes"):
        stgan({"img": torch.zeros(1, 3, S, S), "attrs": torch.zeros(1, 5)}, mode="tensor")


def test_conditions_and_target_sampling():
    """StarGAN gets the target, AttGAN (2t - 1) * thres_int, STGAN the difference of those; training targets are
    permuted batch rows with one hair colour."""
    src, tgt = torch.tensor([[1.0, 0, 0, 1, 0]]), torch.tensor([[0.0, 1, 0, 1, 1]])
    assert torch.equal(small("StarGAN").condition(src, tgt), tgt)
    assert small("AttGAN").condition(src, tgt).tolist() == [[-0.5, 0.5, -0.5, 0.5, 0.5]]
    assert small("STGAN", thres_int=1.0).condition(src, tgt).tolist() == [[-2.0, 2.0, 0.0, 0.0, 2.0]]
    torch.manual_seed(3)
    model = small("AttGAN")
    with torch.no_grad():
        out = model.generate(model.data_preprocessor(attr_batch(3), False)["inputs"])
    assert "rec" not in out and out["fake"].shape == (3, 3, S, S)
    assert (out["target"][:, :3].sum(1) <= 1).all()
    rows = {tuple(r) for r in torch.stack(attr_batch(3)["inputs"]["attrs"]).tolist()}
    assert {tuple(r) for r in out["target"].tolist()} <= rows
    flipped = flip_one_attr(torch.tensor([[0.0, 1, 0, 1, 1]] * 2), torch.tensor([0, 4]), ATTRS)
    assert flipped.tolist() == [[1, 0, 0, 1, 1], [0, 1, 0, 1, 0]]


def test_shapes_and_full_size_counts():
    """STU outputs, the discriminators' heads, and the full networks' parameter counts from hand sums."""
    stu = SelectiveTransferUnit(state_channels=12, channels=8)
    out, state = stu(torch.zeros(2, 8, 8, 8), torch.zeros(2, 12, 4, 4))
    assert out.shape == state.shape == (2, 8, 8, 8)
    assert sum(p.numel() for p in stu.parameters()) == 12 * 8 * 16 + 8 + 3 * (16 * 8 * 9 + 8)
    with pytest.raises(ValueError, match="does not match the skip feature"):
        stu(torch.zeros(1, 8, 6, 6), torch.zeros(1, 12, 4, 4))
    src, cls = small("StarGAN").discriminator(torch.zeros(2, 3, S, S))
    assert src.shape == (2, 1, 4, 4) and cls.shape == (2, 5)  # PatchGAN map at S / 8, K logits
    attgan = small("AttGAN")
    adv, cls = attgan.discriminator(torch.zeros(2, 3, S, S))
    assert adv.shape == (2, 1) and cls.shape == (2, 5)
    # PaddleGAN's 'kaiming' init: U(+-1/sqrt(fan_in)); a transposed conv's fan_in is out_channels * k * k
    for layer, fan_in in ((attgan.discriminator.features[0], 3 * 16), (attgan.generator.to_image[0], 3 * 16),
                          (attgan.generator.decoder[0][0], 32 * 16)):
        bound = fan_in ** -0.5
        assert 0.9 * bound < layer.weight.abs().max() <= bound

    def count(m):
        return sum(p.numel() for p in m.parameters())

    # StarGAN G, K = 5: conv7 (8 -> 64), downs 64->128->256, 6 blocks of two 3x3 256->256, ups, conv7 64 -> 3;
    # IN affine: 2 per channel; no conv biases
    g = (8 * 64 * 49 + 64 * 128 * 16 + 128 * 256 * 16 + 6 * 2 * 256 * 256 * 9 + 256 * 128 * 16 + 128 * 64 * 16
         + 64 * 3 * 49 + 2 * (64 + 128 + 256 + 6 * 2 * 256 + 128 + 64))
    d = sum(c_in * c_out * 16 + c_out for c_in, c_out in
            zip([3, 64, 128, 256, 512, 1024], [64, 128, 256, 512, 1024, 2048])) + 2048 * 9 + 2048 * 5 * 4
    with torch.device("meta"):  # counts only: no memory, no initialisation
        stargan = MODELS.build({"type": "StarGAN", "generator": {"type": "StarGANGenerator"},
                                "discriminator": {"type": "StarGANDiscriminator"}})
        gen = MODELS.build({"type": "STGANGenerator", "num_attrs": 13})
    assert (count(stargan.generator), count(stargan.discriminator)) == (g, d) == (8430528, 44762048)
    # STGAN's STUs at K = 13: states 1024+13 -> 512, 512+13 -> 256, 256+13 -> 128, 128+13 -> 64
    stus = sum(s * c * 16 + c + 3 * (2 * c * c * 9 + c) for s, c in
               zip([1037, 525, 269, 141], [512, 256, 128, 64]))
    assert count(gen.stus) == stus


def test_config_builds():
    """The CelebA configs resolve and build at full size with their attribute lists (dataset = model)."""
    from oars.config import load_config

    for name, kind, k in (("stargan/stargan_celeba.yaml", "StarGAN", 5), ("attgan/attgan_celeba.yaml", "AttGAN", 13),
                          ("stgan/stgan_celeba.yaml", "STGAN", 13)):
        cfg = load_config(str(CONFIGS / name))
        assert cfg.model.type == kind and len(cfg.model.attr_names) == k
        assert list(cfg.train_dataloader.dataset.selected_attrs) == list(cfg.model.attr_names)
        assert list(cfg.val_dataloader.dataset.selected_attrs) == list(cfg.model.attr_names)
