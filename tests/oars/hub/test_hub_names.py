"""Hub names -> entries: torchvision builders and weight members read from torchvision's enums, the default
member, unknown names answered with close names, and the converters every curated entry names."""

from __future__ import annotations

import pytest

from oars.hub import HubError, is_hub_name, resolve
from oars.hub.download import hash_prefix_of, mirrored_url
from oars.hub.entries import curated


def test_builder_resolves_to_its_default_member_with_torchvision_url_hash_and_size(hub_env):
    import torchvision

    default = torchvision.models.get_model_weights("resnet50").DEFAULT
    entry = resolve("torchvision://resnet50")
    assert entry.name == f"torchvision://resnet50.{default.name}"
    assert entry.url == default.url and entry.num_params == default.meta["num_params"]
    assert entry.sha256 == hash_prefix_of(default.url.rsplit("/", 1)[-1]) and len(entry.sha256) >= 8
    assert entry.path == f"{hub_env}/{default.url.rsplit('/', 1)[-1]}" and not entry.cached
    assert resolve("torchvision://resnet50.DEFAULT") == entry == resolve("resnet50")  # bare builder: torchvision


def test_member_is_chosen_and_converter_comes_from_the_table(hub_env):
    v1 = resolve("torchvision://resnet50.IMAGENET1K_V1")
    assert v1.url.endswith("/resnet50-0676ba61.pth") and v1.sha256 == "0676ba61" and v1.converter is None
    assert resolve("torchvision://maskrcnn_resnet50_fpn").converter == curated()["maskrcnn_resnet50_fpn"]["converter"]


@pytest.mark.parametrize(("name", "needles"), [
    ("torchvision://resnet5", ["no model builder 'resnet5'", "close names:", "resnet50"]),
    ("torchvision://maskrcnn_resnet50", ["close names:", "maskrcnn_resnet50_fpn"]),
    ("torchvision://resnet50.IMAGENET1K_V3", ["ResNet50_Weights has no member",
                                              "IMAGENET1K_V1, IMAGENET1K_V2, DEFAULT"]),
    ("hf://resnet50", ["unknown hub scheme", "torchvision://, oars://"]),
    ("oars://nothing_here", ["oars://nothing_here is not registered", "tools/hub.py register"]),
])
def test_unknown_names_give_one_message_with_close_names(hub_env, name, needles):
    with pytest.raises(HubError) as info:
        resolve(name)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_hash_prefix_and_mirror_url_follow_torch_hub(monkeypatch):
    assert hash_prefix_of("resnet50-11ad3fa6.pth") == "11ad3fa6"
    assert hash_prefix_of("vgg16_features-amdegroot-88682ab5.pth") == "88682ab5"
    assert hash_prefix_of("no_hash.pth") is None
    url = "https://download.pytorch.org/models/resnet18-f37072fd.pth"
    monkeypatch.delenv("OARS_HUB_URL", raising=False)
    assert mirrored_url(url) == url
    monkeypatch.setenv("OARS_HUB_URL", "http://127.0.0.1:8000/mirror/")
    assert mirrored_url(url) == "http://127.0.0.1:8000/mirror/resnet18-f37072fd.pth"
    assert is_hub_name("torchvision://resnet18") and is_hub_name("oars://x") and not is_hub_name("a/b.pth")


def test_every_converter_the_table_names_is_registered_by_a_task():
    from oars.hub import registered_converters

    registered = registered_converters()
    named = {row["converter"] for row in curated().values() if row.get("converter")}
    assert named and named <= set(registered), sorted(named - set(registered))
    for name in named:
        assert callable(registered[name].resolve()), name
