"""A checkpoint of another model is one short message from the checkpoint's stored config (issue 37): an FCOS
checkpoint with the YOLOv3 config names both models and the checkpoint's config instead of listing every key (the
message was 21-22 KB); a checkpoint of the same model with other settings lists each kind of difference cut to a
count and its first few keys."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from demo_utils import ROOT, det_demo_overrides, run_tool

from oars.config import config_to_yaml, load_config
from oars.engine.checkpoint_mismatch import SHOWN_KEYS, checkpoint_mismatch, short_detail

FCOS = os.path.join(ROOT, "configs/detection/fcos/fcos_r18_fpn_demo_shapes.yaml")
YOLO = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")


def _checkpoint(config: str, overrides: list[str], path: str, *, run_name: str | None = None) -> str:
    """Random weights of ``config`` saved the way a training run saves them (meta.config_yaml, experiment_name)."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.tasks import activate

    cfg = load_config(config, overrides)
    activate(cfg.default_scope)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model))
    meta = {"config_yaml": config_to_yaml(cfg), "dataset_meta": {"classes": ["circle", "square", "triangle"]}}
    if run_name:
        meta["experiment_name"] = run_name
    torch.save({"state_dict": model.state_dict(), "meta": meta}, path)
    return path


@pytest.fixture(scope="module")
def fcos_checkpoint(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("fcos_ckpt")
    return _checkpoint(FCOS, ["model.backbone.base_channels=8", "model.neck.out_channels=16",
                              "model.bbox_head.stacked_convs=1", "model.bbox_head.norm.num_groups=8"],
                       os.path.join(folder, "epoch_2.pth"),
                       run_name="fcos_r18_fpn_demo_shapes_0123abcd_20261206_101354")


@pytest.mark.slow  # builds YOLOv3 and the test loader in a subprocess: about a minute on two busy cores
def test_eval_with_a_checkpoint_of_another_model_names_both_in_one_short_message(fcos_checkpoint, demo_data):
    out = run_tool("eval.py", "-c", YOLO, "-w", fcos_checkpoint, "-o", *det_demo_overrides(demo_data), check=False)
    assert out.returncode != 0
    error = out.stderr.strip().splitlines()[-1]
    assert error == (f"error: {fcos_checkpoint} was trained as SingleStageDetector (ResNet backbone, FCOSHead) "
                     f"(config fcos_r18_fpn_demo_shapes.yaml); {YOLO} builds YOLOv3 (DarkNet backbone, YOLOv3Head): "
                     "pass the checkpoint's config (-c fcos_r18_fpn_demo_shapes.yaml; every checkpoint stores it in "
                     "meta.config_yaml) or a checkpoint of this model"), error
    assert "Traceback" not in out.stderr and "backbone.conv1.weight" not in out.stderr


def test_the_run_config_beside_the_checkpoint_is_the_one_to_pass(fcos_checkpoint, tmp_path):
    import shutil

    ckpt = str(tmp_path / "epoch_2.pth")
    shutil.copy(fcos_checkpoint, ckpt)
    (tmp_path / "config.yaml").write_text("model: {}\n")
    message = str(checkpoint_mismatch(ckpt, YOLO, "Missing key(s) in state_dict: \"a\"."))
    assert message == (f"{ckpt} was trained as SingleStageDetector (ResNet backbone, FCOSHead) (config "
                       f"fcos_r18_fpn_demo_shapes.yaml); {YOLO} builds YOLOv3 (DarkNet backbone, YOLOv3Head): pass the "
                       f"checkpoint's config (-c {tmp_path / 'config.yaml'}, the run's resolved config beside the "
                       "checkpoint) or a checkpoint of this model")


def test_the_same_model_with_other_settings_lists_keys_cut_to_a_count(tmp_path):
    small = _checkpoint(FCOS, ["model.backbone.base_channels=8", "model.neck.out_channels=16",
                               "model.bbox_head.stacked_convs=1", "model.bbox_head.norm.num_groups=8"],
                        str(tmp_path / "small.pth"))
    cfg = load_config(FCOS, ["model.backbone.base_channels=8", "model.neck.out_channels=16",
                             "model.bbox_head.norm.num_groups=8"])  # stacked_convs 2: more keys than the file has
    from oars.pipelines.model import init_model
    from oars.tasks import activate

    activate(cfg.default_scope)
    with pytest.raises(Exception) as err:
        init_model(cfg, small)
    message = str(err.value)
    assert message.startswith(f"{small} does not fit the model of {FCOS} (it was trained as SingleStageDetector "
                              "(ResNet backbone, FCOSHead): same model type, other settings?): ")
    assert " missing keys (bbox_head." in message and "more" not in message.split("missing keys")[0]
    assert len(message) < 1200, message


def test_key_lists_are_cut_to_the_first_few_and_a_count():
    keys = [f"backbone.layer{i}.weight" for i in range(317)]
    torch_text = ("Error(s) in loading state_dict for FCOS:\n\tMissing key(s) in state_dict: "
                  + ", ".join(f'"{k}"' for k in keys) + '. \n\tUnexpected key(s) in state_dict: "head.w". \n\t'
                  "size mismatch for head.cls.weight: copying a param with shape torch.Size([80, 256]) from "
                  "checkpoint, the shape in current model is torch.Size([3, 256]).")
    text = short_detail(torch_text)
    shown = ", ".join(keys[:SHOWN_KEYS])
    assert text == (f"317 missing keys ({shown}, … and 312 more); 1 unexpected key (head.w); 1 shape mismatch "
                    "(head.cls.weight: checkpoint [80, 256], model [3, 256])")
    mmengine_text = ("The model and loaded state dict do not match exactly\n\nunexpected key in source state_dict: "
                     "a.b, c.d\n\nmissing keys in source state_dict: " + ", ".join(keys) + "\n")
    assert short_detail(mmengine_text) == f"317 missing keys ({shown}, … and 312 more); 2 unexpected keys (a.b, c.d)"
    # a checkpoint without a stored config still gets the cut lists
    plain = checkpoint_mismatch("/nonexistent.pth", YOLO, torch_text)
    assert str(plain).startswith(f"/nonexistent.pth does not fit the model of {YOLO}: 317 missing keys")
