"""Exact resume of GAN training through the Runner: a deterministic CPU run of 8 iterations versus the same run
killed at iteration 6 and resumed from its iteration-4 checkpoint ends with identical generator, discriminator and
EMA weights, image pools, iteration counter and optimizer states (the n_critic cadence and the EMA start are read
from the model's ``train_iter`` buffer, the noise from torch's generator that RNGStateHook restores)."""

from __future__ import annotations

import os

import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import BaseDataset
from training_hooks import CrashAt

from gan.registry import DATASETS
from gan.structures import GANDataSample
from oars.engine.checkpoint import load_checkpoint_file
from oars.engine.runner import build_runner, prepare_config


@DATASETS.register_module()
class _ResumeTestImages(BaseDataset):
    """8 fixed random uint8 images (per index), packed as PackGANInputs packs them."""

    def __init__(self, keys: tuple[str, ...] = ("img",), size: int = 32, **kwargs) -> None:
        self.keys, self.size = tuple(keys), size
        super().__init__(serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        return [{"sample_idx": i} for i in range(8)]

    def __getitem__(self, idx: int) -> dict:
        gen = torch.Generator().manual_seed(idx)
        inputs = {k: torch.randint(0, 256, (3, self.size, self.size), generator=gen, dtype=torch.uint8)
                  for k in self.keys}
        return {"inputs": inputs, "data_samples": GANDataSample(metainfo={"sample_idx": idx})}


MODELS = {
    "DCGAN": {"type": "DCGAN", "noise_size": 8, "n_critic": 2, "ema_config": {"momentum": 0.9, "start_iter": 2},
              "generator": {"type": "DCGANGenerator", "ngf": 4, "output_size": 32},
              "discriminator": {"type": "DCGANDiscriminator", "ndf": 4, "input_size": 32}},
    "CycleGAN": {"type": "CycleGAN", "pool_size": 3, "gan_loss": {"type": "GANLoss", "gan_type": "lsgan"},
                 "identity_loss": {"type": "L1Loss", "loss_weight": 5.0},
                 "generator": {"type": "ResnetGenerator", "ngf": 4, "num_blocks": 1},
                 "discriminator": {"type": "PatchDiscriminator", "ndf": 4, "n_layers": 2, "norm": "IN"}},
}


def _config(kind: str, work_dir: str) -> Config:
    keys = ["img"] if kind == "DCGAN" else ["img_A", "img_B"]
    adam = {"optimizer": {"type": "Adam", "lr": 1e-3, "betas": [0.5, 0.999]}}
    return Config({
        "default_scope": "gan",
        "work_dir": work_dir,
        "model": MODELS[kind],
        # InfiniteSampler: an IterBasedTrainLoop over DefaultSampler restarts its DataLoader and does not resume exactly
        "train_dataloader": {"batch_size": 2, "num_workers": 0, "sampler": {"type": "InfiniteSampler", "shuffle": True},
                             "dataset": {"type": "_ResumeTestImages", "keys": keys}},
        "train_cfg": {"type": "IterBasedTrainLoop", "max_iters": 8},
        "optim_wrapper": {"constructor": "MultiOptimWrapperConstructor", "generator": adam, "discriminator": adam},
        # one list: mmengine builds it for each optimizer (a dict keyed by optimizer is mmengine's other form)
        "param_scheduler": [{"type": "LinearLR", "start_factor": 1.0, "end_factor": 0.1, "begin": 4, "end": 8,
                             "by_epoch": False}],
        "default_hooks": {"checkpoint": {"type": "CheckpointHook", "interval": 4, "by_epoch": False,
                                         "max_keep_ckpts": 3},
                          "logger": {"type": "LoggerHook", "interval": 100}},
        "log_processor": {"by_epoch": False},
        "randomness": {"seed": 3, "deterministic": True},
        "env_cfg": {"dist_cfg": {"backend": "gloo"}},
    })


def _train(kind: str, work_dir: str, resume: bool = False, crash_at: int | None = None):
    runner = build_runner(prepare_config(_config(kind, work_dir), work_dir=work_dir, resume=resume))
    if crash_at is not None:
        runner.register_hook(CrashAt(crash_at), priority="VERY_HIGH")
    runner.train()
    return runner


def _assert_same(a, b, where: str) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["DCGAN", "CycleGAN"])
def test_resumed_gan_run_matches_uninterrupted(kind, tmp_path):
    ref_dir, cut_dir = str(tmp_path / "ref"), str(tmp_path / "cut")
    _train(kind, ref_dir)
    with pytest.raises(KeyboardInterrupt):
        _train(kind, cut_dir, crash_at=6)
    assert not os.path.exists(os.path.join(cut_dir, "iter_8.pth"))
    _train(kind, cut_dir, resume=True)
    ref = load_checkpoint_file(os.path.join(ref_dir, "iter_8.pth"))
    cut = load_checkpoint_file(os.path.join(cut_dir, "iter_8.pth"))
    assert int(ref["state_dict"]["train_iter"]) == 8
    if kind == "DCGAN":  # generator steps at iterations 2, 4, 6, 8; EMA averaging from the 3rd
        assert int(ref["state_dict"]["generator_ema.steps"]) == 3
    else:
        assert ref["state_dict"]["fake_A_pool._extra_state"].shape == (3, 3, 32, 32)
    assert set(ref["optimizer"]) == {"generator", "discriminator"}
    _assert_same(ref["state_dict"], cut["state_dict"], "state_dict")
    _assert_same(ref["optimizer"], cut["optimizer"], "optimizer")
    _assert_same(ref["param_schedulers"], cut["param_schedulers"], "param_schedulers")
    for name in ("generator", "discriminator"):  # the linear decay after iteration 4 was stepped for both
        assert ref["optimizer"][name]["param_groups"][0]["lr"] < 0.5e-3
