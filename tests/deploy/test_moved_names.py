"""The runtime's flat video_* / gan_* modules moved into the predictor plug-ins' packages and ``clips``: every old
import name still works and is the moved module itself (monkeypatching one name patches the other)."""

from __future__ import annotations

import importlib
import os

import pytest

from oars_deploy.moved import MOVED, PACKAGE


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_is_the_moved_module(old):
    module = importlib.import_module(f"{PACKAGE}.{old}")
    assert module is importlib.import_module(f"{PACKAGE}.{MOVED[old]}")
    assert module.__name__ == f"{PACKAGE}.{MOVED[old]}"  # the module keeps its own name and spec


def test_no_file_is_left_at_an_old_place():
    root = os.path.dirname(importlib.import_module(PACKAGE).__file__)
    assert not [old for old in MOVED if os.path.exists(os.path.join(root, f"{old}.py"))]


def test_old_from_import_forms_work():
    from oars_deploy import gan_config
    from oars_deploy.video_predictor import VideoPredictor

    assert gan_config.GAN_KEY == "gan" and VideoPredictor.__module__ == f"{PACKAGE}.predictors.clip_classes.predictor"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"{PACKAGE}.video_nothing")
