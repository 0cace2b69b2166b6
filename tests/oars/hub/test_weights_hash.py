"""Every load of a named weight file checks its sha256, whatever path it takes: a config's ``init.checkpoint`` (also
through ``train``), ``load_from``, a file put by hand where the offline message says, ``oars.Model("oars://NAME")``,
a distillation teacher and ``tools/hub.py download`` all refuse a planted file with the same message (file, expected
and found hash, what to do), and load the right one. The hash is remembered per process until the file changes.

Planted files carry a marker value (0.125 in the stem's weights) that shows whether they were loaded. The hub cache
and the registry live in a temporary folder (``hub_env``); nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import os.path as osp
import re
import time

import pytest
import torch
from demo_utils import DET_DEMO_CFG, ROOT
from mmengine.model import BaseModel
from torch import nn

from oars.engine.checkpoint import load_checkpoint_file
from oars.hub import HubUnavailableError, WeightsHashError, register, resolve

NAME = "torchvision://resnet18"
MARKER = 0.125


def _plant(path: str, value: float = MARKER) -> str:
    """A resnet-stem-shaped state dict (``conv1.weight`` [8, 3, 7, 7], filled with ``value``) saved at ``path``;
    returns its sha256."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    torch.save({"conv1.weight": torch.full((8, 3, 7, 7), value)}, path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _accept(monkeypatch, digest: str) -> None:
    """Make torchvision entries expect ``digest``'s prefix (our planted file cannot have torchvision's hash)."""
    import oars.hub.entries as entries

    monkeypatch.setattr(entries, "hash_prefix_of", lambda filename: digest[:8])


def _assert_one_message(err: BaseException, name: str, path: str, expected: str, found: str, prefix: str = "") -> None:
    message = str(err)
    assert message.startswith(prefix), message
    message = message[len(prefix):]
    assert message.startswith(f"{name}: the sha256 of {path} is {found}, expected "), message
    assert expected in message, message
    if name.startswith("torchvision://"):
        assert f"delete it and run: python tools/hub.py download {name}" in message, message
    else:
        assert "python tools/hub.py register" in message and "--force" in message, message


def test_config_init_refuses_a_planted_file_and_loads_the_right_one(hub_env, monkeypatch):
    from oars.models.backbones.resnet import ResNet

    entry = resolve(NAME)  # torchvision://resnet18.IMAGENET1K_V1, resnet18-f37072fd.pth
    found = _plant(entry.path)
    backbone = ResNet(18, base_channels=8, init={"checkpoint": NAME})
    with pytest.raises(WeightsHashError) as info:
        backbone.init_weights()
    _assert_one_message(info.value, entry.name, entry.path, f"it to start with {entry.sha256}", found)
    assert not torch.all(backbone.state_dict()["conv1.weight"] == MARKER)  # the planted weights never got in

    _accept(monkeypatch, found)  # the good case: the file is the one the name promises
    backbone.init_weights()
    assert torch.all(backbone.state_dict()["conv1.weight"] == MARKER)


class _Stem(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 7, bias=False)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        return self.conv1(inputs)


def test_load_from_refuses_a_planted_file_and_loads_the_right_one(hub_env, monkeypatch, tmp_path):
    from oars.engine.runner import OarsRunner

    entry = resolve(NAME)
    found = _plant(entry.path)
    runner = OarsRunner(model=_Stem(), work_dir=str(tmp_path / "work"), load_from=NAME, default_scope="oars")
    with pytest.raises(WeightsHashError) as info:
        runner.load_or_resume()
    _assert_one_message(info.value, entry.name, entry.path, f"it to start with {entry.sha256}", found)
    assert not torch.all(runner.model.conv1.weight == MARKER)

    _accept(monkeypatch, found)
    runner.load_or_resume()
    assert torch.all(runner.model.conv1.weight == MARKER)


def test_train_with_a_planted_init_checkpoint_stops_before_training(hub_env, demo_data, tmp_path):
    """``tools/train.py``'s path (:func:`oars.engine.entry.train`): the planted backbone file stops the run when the
    pretrained weights are read, with the one message."""
    from demo_utils import det_demo_overrides

    from oars.engine.entry import train

    entry = resolve(NAME)
    found = _plant(entry.path)
    opts = det_demo_overrides(demo_data, epochs=1, **{"model.backbone.init": f"{{checkpoint: {NAME}}}",
                                                      "custom_hooks": "[]",
                                                      "train_dataloader.dataset.indices": 4,
                                                      "val_dataloader.dataset.indices": 4})
    with pytest.raises(WeightsHashError) as info:
        train(DET_DEMO_CFG, opts, work_dir=str(tmp_path / "work"))
    # the training path names the config key in front (oars.engine.runner: the init file that failed)
    prefix = f"{osp.abspath(DET_DEMO_CFG)}: model.backbone.init.checkpoint: "
    _assert_one_message(info.value, entry.name, entry.path, f"it to start with {entry.sha256}", found, prefix)
    assert not (tmp_path / "work" / "epoch_1.pth").exists()


def test_a_file_put_where_the_offline_message_says_is_checked(hub_env, monkeypatch):
    monkeypatch.setenv("OARS_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as info:
        load_checkpoint_file(NAME)
    path = re.search(r"put it at (\S+)", str(info.value)).group(1)  # as a person following the message does
    found = _plant(path)
    entry = resolve(NAME)
    with pytest.raises(WeightsHashError) as info:
        load_checkpoint_file(NAME)
    _assert_one_message(info.value, entry.name, path, f"it to start with {entry.sha256}", found)

    _accept(monkeypatch, found)
    assert torch.all(load_checkpoint_file(NAME)["conv1.weight"] == MARKER)


def _hub_tool():
    spec = importlib.util.spec_from_file_location("oars_tools_hub_hash", osp.join(ROOT, "tools", "hub.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hub_download_and_a_load_refuse_a_cached_file_with_the_same_message(hub_env, monkeypatch, capsys):
    entry = resolve(NAME)
    _plant(entry.path)
    with pytest.raises(WeightsHashError) as by_tool:
        _hub_tool().main(["download", NAME, "--quiet"])
    with pytest.raises(WeightsHashError) as by_load:
        load_checkpoint_file(NAME)
    assert str(by_tool.value) == str(by_load.value)


def _register(tmp_path, value: float = MARKER) -> tuple[str, str, str]:
    """``oars://mine``: a checkpoint with the marker and a tiny config; returns (name, checkpoint, its sha256)."""
    ckpt, cfg = tmp_path / "mine.pth", tmp_path / "cfg.yaml"
    torch.save({"state_dict": {"conv1.weight": torch.full((8, 3, 7, 7), value)}, "meta": {}}, ckpt)
    cfg.write_text("default_scope: oars\nmodel: {type: Tiny}\n")
    record = register("mine", str(ckpt), config=str(cfg), force=True)
    return "oars://mine", str(ckpt), record["sha256"]


def test_model_of_a_registered_name_refuses_a_replaced_file(hub_env, tmp_path):
    from oars import Model

    name, ckpt, registered = _register(tmp_path)
    model = Model(name)  # the good case: the registered file, checked
    assert model.weights == ckpt

    found = _plant(ckpt, value=0.5)  # replaced since registration
    with pytest.raises(WeightsHashError) as info:
        Model(name)
    _assert_one_message(info.value, name, ckpt, registered, found)
    with pytest.raises(WeightsHashError) as later:  # a Model made before the replacement checks again at each use
        model.export()
    with pytest.raises(WeightsHashError):
        model.val()
    with pytest.raises(WeightsHashError) as by_eval:  # tools/eval.py -w oars://mine: the same message
        load_checkpoint_file(name)
    assert str(info.value) == str(later.value) == str(by_eval.value)

    # a plain path is the user's own file: loaded as it is, no hash to check
    assert torch.all(load_checkpoint_file(ckpt)["conv1.weight"] == 0.5)

    register("mine", ckpt, force=True)  # re-registered on purpose: loads again
    assert torch.all(load_checkpoint_file(name)["conv1.weight"] == 0.5)


def test_a_distillation_teacher_of_a_registered_name_is_checked(hub_env, tmp_path):
    from oars.pipelines.compress.distill import load_teacher

    name, ckpt, registered = _register(tmp_path)
    found = _plant(ckpt, value=0.5)
    with pytest.raises(WeightsHashError) as info:
        load_teacher(DET_DEMO_CFG, name)
    _assert_one_message(info.value, name, ckpt, registered, found)


def test_hash_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    import oars.hub.verify as verify

    calls: list[str] = []
    real = verify.sha256_file
    monkeypatch.setattr(verify, "sha256_file", lambda path: calls.append(path) or real(path))
    path = str(tmp_path / "w-0.pth")
    with open(path, "wb") as f:
        f.write(b"a" * 1000)
    digest = hashlib.sha256(b"a" * 1000).hexdigest()

    verify.check_hash(path, digest, "oars://w")
    verify.check_hash(path, digest, "oars://w")
    assert len(calls) == 2  # written just now: not remembered (a coarse clock could hide the next write)
    time.sleep(verify._RACY_NS / 1e9 + 0.02)
    verify.check_hash(path, digest, "oars://w")
    verify.check_hash(path, digest[:8], "oars://w")
    assert len(calls) == 3  # the next check of an unchanged file reads nothing

    before = os.stat(path)
    with open(path, "r+b") as f:  # same size, same mtime restored: only the ctime tells
        f.write(b"b")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
    with pytest.raises(WeightsHashError, match=f"expected {digest}"):
        verify.check_hash(path, digest, "oars://w")
    assert len(calls) == 4

    with open(path, "wb") as f:  # another size
        f.write(b"a" * 999)
    with pytest.raises(WeightsHashError):
        verify.check_hash(path, digest, "oars://w")
    assert len(calls) == 5

    other = str(tmp_path / "other")
    with open(other, "wb") as f:
        f.write(b"a" * 1000)
    time.sleep(verify._RACY_NS / 1e9 + 0.02)
    with pytest.raises(WeightsHashError):
        verify.check_hash(path, digest, "oars://w")
    with pytest.raises(WeightsHashError):  # the wrong file's hash is remembered as well: still refused, not read
        verify.check_hash(path, digest, "oars://w")
    assert len(calls) == 6
    os.replace(other, path)  # replaced by a rename (another inode): hashed again, and accepted
    verify.check_hash(path, digest, "oars://w")
    assert len(calls) == 7
