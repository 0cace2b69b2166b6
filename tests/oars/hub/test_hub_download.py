"""Downloads from a local server on 127.0.0.1 (OARS_HUB_URL): a good file is cached and loads (also as a
backbone's ``init.checkpoint``); a file that fails torchvision's sha256 prefix and a download cut short leave
nothing in the cache; without a server (or offline) one message gives the URL and the exact path."""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

from oars.hub import HubError, HubUnavailableError, fetch, resolve
from oars.hub.download import check_hash
from oars.hub.loading import hub_file

NAME = "torchvision://mobilenet_v3_small"


def _serve(hub_server, monkeypatch, data: bytes, kind: str = "models") -> str:
    """Serve ``data`` under the entry's torchvision file name; point OARS_HUB_URL at it; return the file name."""
    base, files = hub_server
    filename = resolve(NAME).url.rsplit("/", 1)[-1]
    files[filename] = data
    monkeypatch.setenv("OARS_HUB_URL", f"{base}/{kind}")
    return filename


def _accept_hash_of(monkeypatch, data: bytes) -> str:
    """Our random weights cannot have torchvision's hash: make the entry expect the served file's prefix."""
    import oars.hub.entries as entries

    prefix = hashlib.sha256(data).hexdigest()[:8]
    monkeypatch.setattr(entries, "hash_prefix_of", lambda filename: prefix)
    return prefix


def test_check_hash_accepts_a_prefix_and_rejects_another(tmp_path):
    path = tmp_path / "f-0.pth"
    path.write_bytes(b"oars")
    digest = hashlib.sha256(b"oars").hexdigest()
    check_hash(str(path), digest[:10], "x")
    check_hash(str(path), None, "x")
    with pytest.raises(HubError, match=f"expected it to start with {'0' * 8}"):
        check_hash(str(path), "0" * 8, "x")


def test_good_download_is_cached_and_loads_as_a_backbone_init(hub_env, hub_server, mobilenet_file, monkeypatch):
    data, state = mobilenet_file
    filename = _serve(hub_server, monkeypatch, data)
    _accept_hash_of(monkeypatch, data)
    entry, path = hub_file(NAME)
    assert path == os.path.join(hub_env, filename) and entry.cached
    assert open(path, "rb").read() == data
    assert os.listdir(hub_env) == [filename]  # no temporary file left beside it
    from oars.engine.checkpoint import check_checkpoint_file

    assert check_checkpoint_file(NAME) == NAME  # -w NAME (eval, export) passes the early check, by its name

    from oars.models.backbones.mobilenet_v3 import MobileNetV3

    backbone = MobileNetV3(arch="small", init={"checkpoint": NAME})
    backbone.init_weights()  # through oars.engine.checkpoint.load_checkpoint_file, from the cache now
    loaded = backbone.state_dict()
    key = next(k for k in loaded if k.endswith("weight") and k.startswith("features.1"))
    assert torch.equal(loaded[key], state[key])


def test_file_failing_the_sha256_prefix_is_rejected_and_removed(hub_env, hub_server, mobilenet_file, monkeypatch):
    data, _ = mobilenet_file
    _serve(hub_server, monkeypatch, data)  # random weights: not torchvision's sha256 prefix
    expected = resolve(NAME).sha256
    with pytest.raises(HubError) as info:
        hub_file(NAME)
    assert f"expected it to start with {expected}" in str(info.value) and "it was removed" in str(info.value)
    assert not os.path.isdir(hub_env) or os.listdir(hub_env) == []


def test_download_cut_short_leaves_no_file(hub_env, hub_server, mobilenet_file, monkeypatch):
    data, _ = mobilenet_file
    _serve(hub_server, monkeypatch, data, kind="short")
    _accept_hash_of(monkeypatch, data)
    with pytest.raises(HubUnavailableError) as info:
        hub_file(NAME)
    assert "closed the connection after" in str(info.value) or "IncompleteRead" in str(info.value), str(info.value)
    assert not os.path.isdir(hub_env) or os.listdir(hub_env) == []


@pytest.mark.parametrize("how", ["offline", "refused"])
def test_unavailable_file_gives_one_message_with_url_and_path(hub_env, monkeypatch, how):
    entry = resolve("torchvision://resnet18")
    if how == "offline":
        monkeypatch.setenv("OARS_HUB_OFFLINE", "1")
        url = entry.url
    else:  # nothing listens on port 9 (discard) of 127.0.0.1 here: connection refused at once
        monkeypatch.setenv("OARS_HUB_URL", "http://127.0.0.1:9/models")
        url = "http://127.0.0.1:9/models/" + entry.url.rsplit("/", 1)[-1]
    with pytest.raises(HubUnavailableError) as info:
        fetch(entry.url, hash_prefix=entry.sha256)
    message = str(info.value)
    assert url in message and entry.path in message and "put it at" in message, message
    from oars.engine.checkpoint import load_checkpoint_file

    with pytest.raises(HubUnavailableError, match="put it at"):  # the same message through the loading seam
        load_checkpoint_file("torchvision://resnet18")
    from mmengine.runner.checkpoint import CheckpointLoader

    with pytest.raises(HubUnavailableError, match="put it at"):  # and through mmengine's scheme, which is ours now
        CheckpointLoader.load_checkpoint("torchvision://resnet18", logger="silent")
