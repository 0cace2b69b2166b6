"""A work dir's checkpoints: the latest by iteration, damaged ones named, two runs never mixed."""

from __future__ import annotations

import os

import pytest
import torch
from damaged_files import flip_tensor_bytes

from oars.engine.checkpoint import CheckpointError
from oars.engine.work_dir import guard_work_dir, latest_checkpoint, resume_checkpoint, run_files


def _ckpt(path, it, age=0.0):
    torch.save({"state_dict": {"w": torch.full((300,), float(it))}, "meta": {"iter": it}}, path)
    t = 1_700_000_000 + it - age
    os.utime(path, (t, t))
    return str(path)


def test_latest_is_chosen_by_iteration_not_by_the_number_in_the_name(tmp_path):
    newest = _ckpt(tmp_path / "epoch_3.pth", 120)  # 40 iterations per epoch: epoch 3 ends at iteration 120
    _ckpt(tmp_path / "iter_50.pth", 50)
    _ckpt(tmp_path / "iter_20.pth", 20)
    (tmp_path / "last_checkpoint").write_text(str(tmp_path / "epoch_9.pth"))  # stale: rotated away
    assert latest_checkpoint(str(tmp_path)) == newest
    (tmp_path / "last_checkpoint").unlink()
    assert latest_checkpoint(str(tmp_path)) == newest


def test_pointer_into_a_moved_work_dir_is_followed_by_name(tmp_path):
    target = _ckpt(tmp_path / "epoch_3.pth", 30)
    _ckpt(tmp_path / "iter_50.pth", 50)
    (tmp_path / "last_checkpoint").write_text("/old/place/work_dirs/x/epoch_3.pth")
    assert latest_checkpoint(str(tmp_path)) == target


def test_corrupt_latest_names_the_previous_intact_one(tmp_path):
    previous = _ckpt(tmp_path / "epoch_2.pth", 20)
    latest = _ckpt(tmp_path / "epoch_3.pth", 30)
    (tmp_path / "last_checkpoint").write_text(latest)
    flip_tensor_bytes(tmp_path / "epoch_3.pth")
    with pytest.raises(CheckpointError) as err:
        resume_checkpoint(str(tmp_path))
    msg = str(err.value)
    assert "epoch_3.pth is corrupt" in msg and f"--resume {previous}" in msg


def test_unreadable_newer_candidate_is_not_skipped_silently(tmp_path):
    intact = _ckpt(tmp_path / "epoch_2.pth", 20)
    torn = tmp_path / "epoch_3.pth"
    _ckpt(torn, 30)
    torn.write_bytes(torn.read_bytes()[:500])  # no pointer: we cannot know its iteration
    with pytest.raises(CheckpointError, match=r"epoch_3.pth cannot be read .* newest intact checkpoint .*epoch_2"):
        latest_checkpoint(str(tmp_path))
    os.utime(torn, (1_600_000_000, 1_600_000_000))  # an old damaged file: skipped (and logged)
    assert latest_checkpoint(str(tmp_path)) == intact


def test_guard_refuses_and_overwrite_deletes_only_run_files(tmp_path):
    for name in ("epoch_1.pth", "best_mIoU_epoch_1.pth", "last_checkpoint", "config.yaml", "pretrained.pth"):
        (tmp_path / name).write_text("x")
    assert run_files(str(tmp_path)) == ["best_mIoU_epoch_1.pth", "epoch_1.pth", "last_checkpoint"]
    with pytest.raises(CheckpointError) as err:
        guard_work_dir(str(tmp_path), resume=False, overwrite=False)
    msg = str(err.value)
    assert "epoch_1.pth" in msg and "--resume" in msg and "--work-dir" in msg and "--overwrite" in msg
    assert guard_work_dir(str(tmp_path), resume=True, overwrite=False) == []
    guard_work_dir(str(tmp_path), resume=False, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["config.yaml", "pretrained.pth"]
    assert guard_work_dir(str(tmp_path), resume=False, overwrite=False) == []  # nothing left to protect


# --- with real training runs (shrunk demo config, 4 iterations per epoch) ---------------------------------------


def test_second_training_into_a_used_work_dir_is_refused_and_overwrite_starts_afresh(demo_data, tmp_path):
    from demo_utils import DEMO_CFG, demo_overrides

    from oars.engine.entry import train

    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5})
    train(DEMO_CFG, opts, work_dir=str(tmp_path))
    first = (tmp_path / "epoch_1.pth").read_bytes()
    (tmp_path / ".oars-tmp-epoch_2.pth.abc123").write_bytes(b"left by a killed run")
    listed = r"\(best_mIoU_epoch_1.pth, epoch_1.pth, last_checkpoint\)"
    with pytest.raises(CheckpointError, match=r"already holds a run.s checkpoints " + listed):
        train(DEMO_CFG, opts, work_dir=str(tmp_path))
    assert (tmp_path / "epoch_1.pth").read_bytes() == first  # untouched
    train(DEMO_CFG, opts, work_dir=str(tmp_path), overwrite=True)
    assert (tmp_path / "epoch_1.pth").read_bytes() != first
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".oars-tmp-")]  # cleaned at the start


def test_resume_refuses_a_changed_model_naming_the_keys(demo_data, tmp_path):
    from demo_utils import DEMO_CFG, demo_overrides

    from oars.engine.entry import load, train
    from oars.engine.runner import prepare_config

    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5})
    train(DEMO_CFG, opts, work_dir=str(tmp_path))
    changed = opts + ["model.backbone.base_channels=8", "model.test_cfg.mode=whole"]
    with pytest.raises(CheckpointError) as err:
        prepare_config(load(DEMO_CFG, changed), work_dir=str(tmp_path), resume=True)
    msg = str(err.value)
    with pytest.raises(CheckpointError, match="trained with a different model"):  # `resume: true` in the config too
        prepare_config(load(DEMO_CFG, changed + ["resume=true"]), work_dir=str(tmp_path))
    assert prepare_config(load(DEMO_CFG, changed + ["resume=true"]), work_dir=str(tmp_path),
                          load_from=str(tmp_path / "epoch_1.pth")).resume is False  # evaluation loads weights only
    assert "epoch_1.pth was trained with a different model" in msg
    assert "model.backbone.base_channels: 4 → 8" in msg and "test_cfg" not in msg
    # the same model resumes (here: one more epoch)
    runner = train(DEMO_CFG, demo_overrides(demo_data, epochs=2, **{"train_cfg.val_interval": 5}),
                   work_dir=str(tmp_path), resume=True)
    assert runner.iter == 8


def test_rotation_removes_the_oldest_only_after_the_new_one_is_written(demo_data, tmp_path, monkeypatch):
    from demo_utils import DEMO_CFG, demo_overrides
    from mmengine.runner import Runner

    from oars.engine.entry import train

    events = []
    real_save, real_remove = Runner.save_checkpoint, os.remove

    def save(self, out_dir, filename, *args, **kwargs):
        real_save(self, out_dir, filename, *args, **kwargs)
        events.append(("saved", filename))

    def remove(path, *args, **kwargs):
        if str(path).endswith(".pth"):
            events.append(("removed", os.path.basename(str(path))))
        real_remove(path, *args, **kwargs)

    monkeypatch.setattr(Runner, "save_checkpoint", save)
    monkeypatch.setattr(os, "remove", remove)
    opts = demo_overrides(demo_data, epochs=3, **{"default_hooks.checkpoint.max_keep_ckpts": 1,
                                                   "default_hooks.checkpoint.save_best": "mIoU"})
    train(DEMO_CFG, opts, work_dir=str(tmp_path))
    removals = [(i, name) for i, (kind, name) in enumerate(events) if kind == "removed"]
    assert {name for _, name in removals} >= {"epoch_1.pth", "epoch_2.pth"}
    for i, name in removals:  # the file saved last before each removal is a newer one of the same kind
        kind = "best_" if name.startswith("best_") else "epoch_"
        last_saved = [n for k, n in events[:i] if k == "saved" and n.startswith(kind)][-1]
        assert last_saved != name, events
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("epoch_")) == ["epoch_3.pth"]
    assert (tmp_path / "last_checkpoint").read_text().endswith("epoch_3.pth")
    assert (tmp_path / "last_checkpoint").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_train_tool_refuses_a_used_work_dir_without_traceback(tmp_path):
    from demo_utils import DEMO_CFG, run_tool

    _ckpt(tmp_path / "epoch_1.pth", 4)
    (tmp_path / "last_checkpoint").write_text(str(tmp_path / "epoch_1.pth"))
    proc = run_tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "already holds a run's checkpoints" in proc.stderr and "--overwrite" in proc.stderr
    assert (tmp_path / "epoch_1.pth").exists()
