"""The predictor role's one ``predict``: a kind that predicts single images implements nothing else, and
``tools/infer.py`` runs its checkpoint through the runtime plug-in's own loop (what ``oars-infer`` runs)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
import pytest

from oars.task_roles import Predictor
from oars.tasks import TASKS


def _kinds():
    return [(scope, kind) for scope in sorted(TASKS) for kind in TASKS[scope].kinds]


@pytest.mark.parametrize("scope,kind", _kinds(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_an_image_kind_implements_predict_and_not_infer(scope, kind):
    role = type(kind.predictor)
    if role.image_plugin is not None:
        assert role.infer is Predictor.infer, f"{scope} {kind.name}: tools/infer.py goes through {role.image_plugin}"
        assert role.predict is not Predictor.predict
    else:  # its input is its own (videos, feature files, noise): tools/infer.py asks the role
        assert role.infer is not Predictor.infer


def test_the_default_infer_arguments_are_the_plugins_flags():
    class Boxes(Predictor):
        image_plugin = "detection_boxes"

    class Own(Predictor):
        pass

    parser = argparse.ArgumentParser()
    Boxes().infer_arguments(parser)
    assert parser.parse_args(["--draw-threshold", "0.5"]).draw_threshold == 0.5
    parser = argparse.ArgumentParser()
    Own().infer_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--draw-threshold", "0.5"])


def test_the_default_infer_is_refused_naming_the_task():
    role = Predictor()
    role.scope = "odd"
    with pytest.raises(Exception, match="tools/infer.py is not available for task 'odd'"):
        role.infer(None, "w.pth", "x", "out", device="cpu", failures=None, args=argparse.Namespace())


def test_the_runtime_draws_a_large_label_map_scaled_down():
    """The picture of a 3000x1500 image is drawn at most PICTURE_MAX_SIDE on its long side, from int64 labels as the
    role's predict gives them (the label PNG keeps the full size)."""
    from oars_deploy.plugins import get_predictor
    from oars_deploy.predictors.semantic_labels.draw import PICTURE_MAX_SIDE, draw_sample

    img = np.zeros((3000, 1500, 3), np.uint8)
    label = np.ones((3000, 1500), np.int64)
    predictor = SimpleNamespace(palette=np.array([[0, 0, 0], [255, 0, 0]], np.uint8), labels=["bg", "fg"])
    picture = get_predictor("semantic_labels").draw(img, {"label": label}, predictor, argparse.Namespace())
    reference = draw_sample(img[:PICTURE_MAX_SIDE, :PICTURE_MAX_SIDE // 2], label[:PICTURE_MAX_SIDE,
                                                                              :PICTURE_MAX_SIDE // 2],
                            predictor.palette, class_names=predictor.labels)
    assert picture.shape == reference.shape  # the panels of a 2048x1024 image, not of 3000x1500
