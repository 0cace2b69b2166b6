"""Scoped registries: the task scopes see the core's classes, and a name registers once."""

import pytest
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import DefaultScope
from torch import nn

import oars.registry as core
import segmentation.registry as seg


def test_task_registries_are_children_of_the_core():
    assert seg.MODELS.parent is core.MODELS and core.MODELS.parent is ROOT_MODELS
    assert seg.MODELS.scope == "segmentation" and core.MODELS.scope == "oars"


def test_task_scope_finds_core_classes_without_importing_them_first():
    # the mmengine `locations` trap: Registry.get imports only its own locations before asking the parent
    assert "oars.models" in seg.MODELS._locations
    assert seg.MODELS.get("ResNet").__module__ == "oars.models.backbones.resnet"
    assert seg.MODELS.get("EncoderDecoder").__module__.startswith("segmentation.models")


def test_root_registry_builds_through_default_scope():
    with DefaultScope.overwrite_default_scope("segmentation"):
        head = ROOT_MODELS.build({"type": "FCNHead", "in_channels": 8, "channels": 4, "num_classes": 3})
    assert type(head).__name__ == "FCNHead"


def test_core_scope_does_not_see_task_classes():
    assert core.MODELS.get("EncoderDecoder") is None


def test_registering_a_name_twice_is_an_error():
    class Dummy(nn.Module):
        pass

    name = "OarsRegistryTestDummy"
    core.MODELS.register_module(name=name, module=Dummy)
    try:
        with pytest.raises(KeyError, match="already registered"):
            core.MODELS.register_module(name=name, module=Dummy)
    finally:
        core.MODELS._module_dict.pop(name)
