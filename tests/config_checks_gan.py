"""Config checks of gan configs (used by tests/test_configs.py): the model shrunk (ngf/ndf 8, 28-32 px) through
train_step on a real OptimWrapperDict, predict and tensor, and the pipelines on synthetic image files. The
full-size parameter counts are pinned in tests/model_sizes.py."""

from __future__ import annotations

import copy

import cv2
import numpy as np
import torch
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope

from gan.registry import OPTIM_WRAPPER_CONSTRUCTORS
from gan.structures import GANDataSample

SIZE = 32
SHRINKABLE = {"DCGANGenerator", "DCGANDiscriminator", "UNetGenerator", "ResnetGenerator", "PatchDiscriminator",
              "StarGANGenerator", "StarGANDiscriminator", "AttGANGenerator", "STGANGenerator", "AttGANDiscriminator"}
ATTRIBUTE_MODELS = ("StarGAN", "AttGAN", "STGAN")


def _channels(net_cfg: dict) -> int:
    return int(net_cfg.get("in_channels", net_cfg.get("out_channels", 3)))


def shrink_model(model_cfg: dict) -> dict:
    """ngf/ndf 8 and 32 px (CGAN keeps 28): U-Net with 5 downsamplings, 2 residual blocks, a pool of 2."""
    cfg = copy.deepcopy(model_cfg)
    gen, disc = cfg["generator"], cfg.get("discriminator") or {}
    if gen["type"] not in SHRINKABLE or disc.get("type", "PatchDiscriminator") not in SHRINKABLE:
        raise KeyError(f"config_checks_gan.shrink_model has no rule for {gen['type']} / {disc.get('type')}: add one")
    if cfg["type"] in ATTRIBUTE_MODELS:  # conv_dim 8, 32 px, the real layer pattern with fewer layers
        return _shrink_attribute_model(cfg)
    gen["ngf"], disc["ndf"] = 8, 8
    if gen["type"] == "DCGANGenerator" and gen.get("output_size", 64) != 28:
        gen["output_size"], disc["input_size"] = SIZE, SIZE
    if gen["type"] == "UNetGenerator":
        gen["num_downs"] = 5
    if gen["type"] == "ResnetGenerator":
        gen["num_blocks"] = 2
    if "noise_size" in cfg:
        cfg["noise_size"] = 16
    if "pool_size" in cfg:
        cfg["pool_size"] = 2
    return cfg


def _shrink_attribute_model(cfg: dict) -> dict:
    gen, disc = cfg["generator"], cfg["discriminator"]
    gen["conv_dim"], disc["conv_dim"], disc["num_layers"] = 8, 8, 3
    if cfg["type"] == "StarGAN":
        gen["num_blocks"] = 2
    else:
        gen["num_layers"] = 3
        disc["fc_dim"] = 16
    if cfg["type"] == "STGAN":
        gen.update(shortcut_layers=2, inject_layers=2, stu_layers=2, stu_inject_layers=2)
    elif cfg["type"] == "AttGAN":
        gen.update(shortcut_layers=1, inject_layers=1)
    disc["image_size"] = SIZE
    return cfg


def _batch(model: torch.nn.Module, n: int = 2) -> dict:
    gen = torch.Generator().manual_seed(0)
    kind = type(model).__name__
    if kind in ("DCGAN", "CGAN"):
        size, ch, keys = model.generator.output_size, model.generator.out_channels, ["img"]
    elif kind in ATTRIBUTE_MODELS:
        size, ch, keys = SIZE, 3, ["img"]
    else:
        size, ch, keys = SIZE, 3, ["img_A", "img_B"]
    inputs: dict = {k: [torch.randint(0, 256, (ch, size, size), generator=gen, dtype=torch.uint8) for _ in range(n)]
                    for k in keys}
    meta = {}
    if kind == "CGAN":
        inputs["label"] = [torch.tensor(model.num_classes - 1 - i) for i in range(n)]
    if kind in ATTRIBUTE_MODELS:
        k = len(model.attr_names)
        inputs["attrs"] = [(torch.arange(k) % 2 == i % 2).float() for i in range(n)]
        meta = {"attr_names": tuple(model.attr_names)}
    return {"inputs": inputs,
            "data_samples": [GANDataSample(metainfo={"sample_idx": i, **meta}) for i in range(n)]}


def run_all_modes(model: torch.nn.Module, num_classes: int | None = None) -> None:
    """train_step (both networks step, losses finite), predict (``fake_img`` 0..255 [C, S, S]) and tensor (the
    export inputs -> [B, C, S, S] in [-1, 1]) on a synthetic batch."""
    adam = {"optimizer": {"type": "Adam", "lr": 2e-4, "betas": [0.5, 0.999]}}
    wrappers = OPTIM_WRAPPER_CONSTRUCTORS.build({"type": "MultiOptimWrapperConstructor", "optim_wrapper_cfg": {
        "generator": adam, "discriminator": adam}})(model)
    model.init_weights()
    for _ in range(model.n_critic):
        log = model.train_step(_batch(model), wrappers)
    assert {"loss_disc", "loss_gen"} <= set(log) and all(torch.isfinite(v) for v in log.values()), log
    model.eval()
    preds = model.val_step(_batch(model))
    fake = preds[0].fake_img
    assert fake.dim() == 3 and 0 <= float(fake.min()) <= float(fake.max()) <= 255
    size = fake.shape[-1]
    with torch.no_grad():
        out = model(model.export_inputs(2, size), mode="tensor")
    assert out.shape == (2, *fake.shape) and float(out.abs().max()) <= 1


def _write(path, h: int, w: int, seed: int) -> str:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    cv2.imwrite(str(path), img)
    return str(path)


def run_pipelines(cfg, tmp_path) -> None:
    """Each pipeline on a synthetic sample of its dataset type (MNIST digit, side-by-side pair file, two domain
    files) packs the keys the model takes, at the size its generator makes."""
    gen = cfg.model.generator
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        ds = cfg[split]["dataset"]
        if ds["type"] == "MNISTDataset":
            results = {"img": np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8), "label": 3,
                       "img_path": "train-images-idx3-ubyte[0]", "sample_idx": 0}
        elif ds["type"] == "ImageFolderGANDataset":
            side = int(gen.get("output_size", 64))  # class folders of ready-sized images (the demo digits)
            results = {"img_path": _write(tmp_path / "img.png", side, side, 3), "label": 3, "sample_idx": 0}
        elif ds["type"] == "CelebADataset":
            attrs = np.array([i % 2 for i in range(len(ds["selected_attrs"]))], dtype=np.float32)
            results = {"img_path": _write(tmp_path / "face.jpg", 218, 178, 4), "attrs": attrs, "sample_idx": 0}
        elif ds["type"] == "PairedImageDataset" and ds.get("img_dir"):
            results = {"img_path": _write(tmp_path / "pair.png", 96, 192, 0), "pair_order": "AB", "sample_idx": 0}
        elif ds["type"] in ("PairedImageDataset", "UnpairedImageDataset"):  # two files, one per domain
            paired = ds["type"] == "PairedImageDataset"  # aligned folders: one size; unpaired: sizes may differ
            results = {"img_A_path": _write(tmp_path / "a.png", 80, 96, 1),
                       "img_B_path": _write(tmp_path / "b.png", *((80, 96) if paired else (72, 64)), 2),
                       "sample_idx": 0}
        else:
            raise AssertionError(f"no synthetic sample for dataset type {ds['type']}")
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(copy.deepcopy(ds["pipeline"]))
        packed = pseudo_collate([pipeline(results)])
        sizes = [t.get("crop_size", t.get("scale")) for t in ds["pipeline"]
                 if t["type"] in ("GANResize", "GANRandomCrop")]
        size = gen.get("output_size", sizes[-1] if sizes else 256)
        for key, images in packed["inputs"].items():
            if key == "label":
                assert int(images[0]) == 3
                continue
            if key == "attrs":
                assert images[0].shape == (len(ds["selected_attrs"]),) and images[0].dtype == torch.float32
                continue
            img = images[0]
            assert img.dtype == torch.uint8 and img.shape == (_channels(gen), size, size), (split, key, img.shape)
