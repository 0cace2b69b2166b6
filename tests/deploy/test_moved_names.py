"""The runtime's flat video_* / gan_* modules moved into the predictor plug-ins' packages and ``clips``: every old
import name still works and is the moved module itself (monkeypatching one name patches the other). The old names
are plain shim modules (a DeprecationWarning, then the moved module stands in ``sys.modules``), not an import hook:
no code is left at an old place."""

from __future__ import annotations

import ast
import importlib
import os
import sys

import pytest

PACKAGE = "oars_deploy"
# old module (under oars_deploy) -> its module now
MOVED = {
    "video_decode": "clips.decode",
    "video_inputs": "clips.inputs",
    "video_preprocess": "clips.preprocess",
    "video_sampling": "clips.sampling",
    "video_config": "predictors.clip_classes.config",
    "video_predictor": "predictors.clip_classes.predictor",
    "video_cli": "predictors.clip_classes.cli",
    "video_features_config": "predictors.feature_classes.config",
    "video_features_io": "predictors.feature_classes.files",
    "video_features_predictor": "predictors.feature_classes.predictor",
    "gan_config": "predictors.gan_images.config",
    "gan_predictor": "predictors.gan_images.predictor",
    "gan_cli": "predictors.gan_images.cli",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_is_the_moved_module(old):
    module = importlib.import_module(f"{PACKAGE}.{old}")
    assert module is importlib.import_module(f"{PACKAGE}.{MOVED[old]}")
    assert module.__name__ == f"{PACKAGE}.{MOVED[old]}"  # the module keeps its own name and spec


def test_no_code_is_left_at_an_old_place():
    """An old place holds a shim only: no function or class, just the warning and the moved module."""
    root = os.path.dirname(importlib.import_module(PACKAGE).__file__)
    for old, new in MOVED.items():
        tree = ast.parse(open(os.path.join(root, f"{old}.py")).read())
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))], old
        assert f"{PACKAGE}.{new}" in ast.unparse(tree) and "DeprecationWarning" in ast.unparse(tree), old


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_warns(old):
    sys.modules.pop(f"{PACKAGE}.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"{PACKAGE}.{old} moved to {PACKAGE}.{MOVED[old]}"):
        importlib.import_module(f"{PACKAGE}.{old}")


def test_old_from_import_forms_work():
    from oars_deploy import gan_config
    from oars_deploy.video_predictor import VideoPredictor

    assert gan_config.GAN_KEY == "gan" and VideoPredictor.__module__ == f"{PACKAGE}.predictors.clip_classes.predictor"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"{PACKAGE}.video_nothing")
