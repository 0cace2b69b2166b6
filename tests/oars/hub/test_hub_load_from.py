"""``load_from: torchvision://...`` through the Runner: the file fetched from the local server, converted by its
entry's converter (a registered name), and loaded into a model with another class count; the head's parameters
whose shapes differ are skipped and listed in the run's log, every other tensor is the file's."""

from __future__ import annotations

import glob
import hashlib
import os

import pytest
import torch
from mmengine.model import BaseModel

from oars.hub import register_converter
from oars.hub.converters import unregister_converter
from oars.hub.entries import curated

NAME = "torchvision://mobilenet_v3_small"
CONVERTER = "test_hub_prefix_net"


class TinyClassifier(BaseModel):
    """torchvision's mobilenet_v3_small under ``net.`` with its own number of classes."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        import torchvision

        self.net = torchvision.models.mobilenet_v3_small(weights=None, num_classes=num_classes)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        return self.net(inputs)


def prefix_net(checkpoint, prefix: str = "net."):
    """The test's converter: torchvision's keys under ``prefix`` (bound by ``register_converter``'s options)."""
    return {prefix + k: v for k, v in checkpoint.items()}


@pytest.fixture
def served(hub_env, hub_server, mobilenet_file, monkeypatch):
    """The random mobilenet_v3_small served as torchvision's file, its entry using the test's converter."""
    import oars.hub.entries as entries

    data, state = mobilenet_file
    base, files = hub_server
    files["mobilenet_v3_small-047dcff4.pth"] = data
    monkeypatch.setenv("OARS_HUB_URL", f"{base}/models")
    prefix = hashlib.sha256(data).hexdigest()[:8]  # random weights: the entry expects this file's hash
    monkeypatch.setattr(entries, "hash_prefix_of", lambda filename: prefix)
    register_converter(CONVERTER, prefix_net, prefix="net.")
    monkeypatch.setitem(curated(), "mobilenet_v3_small", {"converter": CONVERTER, "use": "test"})
    yield state
    unregister_converter(CONVERTER)


def test_load_from_hub_name_skips_and_lists_the_mismatched_head(served, tmp_path):
    from oars.engine.runner import OarsRunner

    state = served
    runner = OarsRunner(model=TinyClassifier(num_classes=5), work_dir=str(tmp_path / "work"), load_from=NAME,
                        default_scope="oars")
    runner.load_or_resume()
    loaded = runner.model.state_dict()
    assert torch.equal(loaded["net.features.0.0.weight"], state["features.0.0.weight"])
    assert torch.equal(loaded["net.classifier.0.weight"], state["classifier.0.weight"])  # same shape: loaded
    assert loaded["net.classifier.3.weight"].shape == (5, 1024)  # the new head keeps its initial values
    log = open(glob.glob(os.path.join(runner.log_dir, "*.log"))[0], encoding="utf-8").read()
    assert f"load_from {NAME}: 2 parameters skipped because their shapes differ" in log, log[-3000:]
    assert "net.classifier.3.weight: (1000, 1024) vs (5, 1024)" in log
    assert "net.classifier.3.bias: (1000,) vs (5,)" in log


def test_strict_loading_of_a_hub_name_refuses_the_mismatch(served, tmp_path):
    from oars.engine.checkpoint import CheckpointError
    from oars.engine.runner import OarsRunner

    runner = OarsRunner(model=TinyClassifier(num_classes=5), work_dir=str(tmp_path / "work"), default_scope="oars")
    with pytest.raises(CheckpointError, match="classifier.3.weight"):
        runner.load_checkpoint(NAME, strict=True)
