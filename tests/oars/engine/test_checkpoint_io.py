"""Safe checkpoint loading and atomic writing."""

import os

import pytest
import torch
from damaged_files import flip_tensor_bytes

from oars.engine.checkpoint import (
    AtomicLocalBackend,
    CheckpointError,
    load_checkpoint_file,
    state_dict_from_checkpoint,
)


class NotATensor:
    def __init__(self):
        self.value = 3


def test_plain_state_dict_loads(tmp_path):
    path = tmp_path / "w.pth"
    torch.save({"state_dict": {"module.a": torch.ones(2)}, "meta": {"epoch": 1}}, path)
    ckpt = load_checkpoint_file(path)
    assert state_dict_from_checkpoint(ckpt) == {"a": ckpt["state_dict"]["module.a"]}


def test_prefix_filter():
    state = state_dict_from_checkpoint({"backbone.conv.weight": torch.ones(1), "head.w": torch.ones(1)}, "backbone")
    assert list(state) == ["conv.weight"]


def test_arbitrary_pickle_is_refused_with_a_reason(tmp_path, monkeypatch):
    path = tmp_path / "evil.pth"
    torch.save({"obj": NotATensor()}, path)
    monkeypatch.delenv("OARS_UNSAFE_LOAD", raising=False)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint_file(path)
    msg = str(err.value)
    assert str(path) in msg and "OARS_UNSAFE_LOAD=1" in msg and "arbitrary code" in msg
    monkeypatch.setenv("OARS_UNSAFE_LOAD", "1")
    assert load_checkpoint_file(path)["obj"].value == 3


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint_file(tmp_path / "nope.pth")
    bad = tmp_path / "torn.pth"
    torch.save({"a": torch.ones(1000)}, bad)
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="torn.pth is truncated or corrupt"):
        load_checkpoint_file(bad)


def test_flipped_bytes_are_called_corrupt(tmp_path):
    path = tmp_path / "epoch_1.pth"
    torch.save({"state_dict": {"w": torch.randn(1000)}, "meta": {"iter": 4}}, path)
    size = path.stat().st_size
    flip_tensor_bytes(path)
    assert path.stat().st_size == size
    # torch.load alone accepts it, with different weights
    assert torch.load(path, weights_only=True)["meta"] == {"iter": 4}
    with pytest.raises(CheckpointError, match=r"epoch_1.pth is corrupt: the bytes of '.*data/0' .* checksum"):
        load_checkpoint_file(path)


def test_truncated_file_is_truncated_not_foreign(tmp_path):
    from oars.engine.checkpoint import check_checkpoint_file

    path = tmp_path / "epoch_2.pth"
    torch.save({"a": torch.ones(1000)}, path)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CheckpointError, match="epoch_2.pth is truncated or corrupt") as err:
        check_checkpoint_file(path)
    assert "not a PyTorch checkpoint" not in str(err.value)


def test_mmengine_loader_uses_the_safe_path(tmp_path, monkeypatch):
    from mmengine.runner.checkpoint import _load_checkpoint

    path = tmp_path / "evil.pth"
    torch.save({"obj": NotATensor()}, path)
    monkeypatch.delenv("OARS_UNSAFE_LOAD", raising=False)
    with pytest.raises(CheckpointError):
        _load_checkpoint(str(path), map_location="cpu")


def test_atomic_put_replaces_whole_file_and_leaves_no_temp(tmp_path):
    backend = AtomicLocalBackend()
    target = tmp_path / "sub" / "ckpt.pth"
    backend.put(b"first", target)
    backend.put(b"second", target)
    assert target.read_bytes() == b"second"
    assert os.listdir(target.parent) == ["ckpt.pth"]


def test_checkpoints_get_normal_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        AtomicLocalBackend().put(b"x", tmp_path / "epoch_1.pth")
    finally:
        os.umask(old)
    assert (tmp_path / "epoch_1.pth").stat().st_mode & 0o777 == 0o644  # mkstemp alone gives 0600


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    backend = AtomicLocalBackend()
    target = tmp_path / "ckpt.pth"
    backend.put(b"good", target)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt  # a kill between writing and renaming

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        backend.put(b"partial", target)
    assert target.read_bytes() == b"good"
    assert os.listdir(tmp_path) == ["ckpt.pth"]


def test_non_checkpoint_files_are_named_as_such(tmp_path):
    text = tmp_path / "config.yaml"
    text.write_text("model: {}\n")
    with pytest.raises(CheckpointError, match="not a PyTorch checkpoint") as err:
        load_checkpoint_file(text)
    assert "OARS_UNSAFE_LOAD" not in str(err.value)


def test_latest_checkpoint_survives_a_torn_pointer(tmp_path):
    from oars.engine.work_dir import latest_checkpoint

    assert latest_checkpoint(str(tmp_path / "missing")) is None
    for n in (1, 2, 10):
        torch.save({}, tmp_path / f"epoch_{n}.pth")
    (tmp_path / "last_checkpoint").write_text("")  # killed while mmengine rewrote the pointer
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "epoch_10.pth")
    (tmp_path / "last_checkpoint").write_text(str(tmp_path / "epoch_2.pth"))
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "epoch_2.pth")
