"""The engine end to end on the shrunk demo config: resume, AMP, EMA, NaN stop, checkpoints."""

from __future__ import annotations

import os

import pytest
import torch
import yaml
from demo_utils import DEMO_CFG, demo_overrides
from training_hooks import CrashAt, PoisonWeights

from oars.engine.checkpoint import load_checkpoint_file
from oars.engine.entry import load, train
from oars.engine.hooks import NonFiniteLossError
from oars.engine.runner import build_runner, prepare_config
from oars.errors import OarsError


def _deterministic(demo_data, epochs, workers=0):
    return demo_overrides(demo_data, epochs=epochs, **{"randomness.deterministic": True, "randomness.seed": 7,
                                                         "train_dataloader.num_workers": workers,
                                                         "train_dataloader.persistent_workers": workers > 0})


def _weights(path):
    ckpt = load_checkpoint_file(path)
    return ckpt["state_dict"], ckpt.get("ema_state_dict")


@pytest.mark.parametrize("workers", [0, 2])
def test_killed_and_resumed_run_matches_uninterrupted(demo_data, tmp_path, workers):
    opts = _deterministic(demo_data, epochs=3, workers=workers)
    ref_dir, cut_dir = str(tmp_path / "ref"), str(tmp_path / "cut")
    train(DEMO_CFG, opts, work_dir=ref_dir)

    cfg = prepare_config(load(DEMO_CFG, opts), work_dir=cut_dir)
    runner = build_runner(cfg)
    runner.register_hook(CrashAt(at_iter=9), priority="VERY_HIGH")  # 4 iters/epoch: dies inside epoch 3
    with pytest.raises(KeyboardInterrupt):
        runner.train()
    assert not os.path.exists(os.path.join(cut_dir, "epoch_3.pth"))
    train(DEMO_CFG, opts, work_dir=cut_dir, resume=True)

    ref_state, ref_ema = _weights(os.path.join(ref_dir, "epoch_3.pth"))
    cut_state, cut_ema = _weights(os.path.join(cut_dir, "epoch_3.pth"))
    assert ref_state.keys() == cut_state.keys()
    for k in ref_state:
        assert torch.equal(ref_state[k], cut_state[k]), k
    assert ref_ema is not None and all(torch.equal(ref_ema[k], cut_ema[k]) for k in ref_ema)


def test_config_and_checkpoint_contents(demo_data, tmp_path):
    runner = train(DEMO_CFG, demo_overrides(demo_data, epochs=1), work_dir=str(tmp_path))
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["model"]["backbone"]["base_channels"] == 4
    assert not {"resume", "load_from", "launcher", "experiment_name"} & set(saved)  # run state stays out
    ckpt = load_checkpoint_file(tmp_path / "epoch_1.pth")
    meta = ckpt["meta"]
    assert yaml.safe_load(meta["config_yaml"])["model"]["num_classes"] == 4
    assert "rng_state" in meta and "ema_state_dict" in ckpt
    # EMA weights are what the checkpoint's state_dict holds and what evaluation used
    ema_model = runner.model if not hasattr(runner.model, "module") else runner.model.module
    assert ckpt["state_dict"].keys() == ema_model.state_dict().keys()
    assert (tmp_path / "last_checkpoint").read_text().strip().endswith("epoch_1.pth")
    assert not [f for f in os.listdir(tmp_path) if f.startswith((".tmp_", ".oars-tmp-"))]


def test_tensorboard_backend_by_config(demo_data, tmp_path):
    pytest.importorskip("tensorboard")
    backends = "[{type: LocalVisBackend}, {type: TensorboardVisBackend}]"
    train(DEMO_CFG, demo_overrides(demo_data, epochs=1, **{"visualizer.vis_backends": backends}),
          work_dir=str(tmp_path))
    assert list(tmp_path.rglob("events.out.tfevents.*"))


def test_amp_bfloat16_on_cpu(demo_data, tmp_path):
    runner = train(DEMO_CFG, demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5}),
                   work_dir=str(tmp_path), amp=True)
    wrapper = runner.optim_wrapper
    assert type(wrapper).__name__ == "MixedPrecisionOptimWrapper" and wrapper.cast_dtype == torch.bfloat16
    loss = runner.message_hub.get_scalar("train/loss").current()
    assert torch.isfinite(torch.tensor(loss))


def test_nan_loss_stops_with_iteration_and_term(demo_data, tmp_path):
    cfg = prepare_config(load(DEMO_CFG, demo_overrides(demo_data, epochs=1)), work_dir=str(tmp_path))
    runner = build_runner(cfg)
    runner.register_hook(PoisonWeights(), priority="VERY_HIGH")
    with pytest.raises(NonFiniteLossError) as err:
        runner.train()
    msg = str(err.value)
    assert "iteration 2" in msg and "loss_ce" in msg


def test_class_count_mismatch_fails_at_build_time(demo_data, tmp_path):
    cfg = prepare_config(load(DEMO_CFG, demo_overrides(demo_data) + ["model.num_classes=5"]), work_dir=str(tmp_path))
    with pytest.raises(OarsError, match=r"4 classes .* model.num_classes is 5"):
        build_runner(cfg)


def test_resume_from_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(OarsError, match="no such checkpoint"):
        prepare_config(load(DEMO_CFG), work_dir=str(tmp_path), resume=str(tmp_path / "nope.pth"))


def test_ignore_index_disagreement_fails_at_build_time(demo_data, tmp_path):
    opts = demo_overrides(demo_data) + ["train_dataloader.dataset.ignore_index=254"]
    cfg = prepare_config(load(DEMO_CFG, opts), work_dir=str(tmp_path))
    with pytest.raises(OarsError, match=r"ignore_index is 254 but model.decode_head.ignore_index=255"):
        build_runner(cfg)
