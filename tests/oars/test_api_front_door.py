"""``oars.Model(x)`` as the one front door: a checkpoint (its stored config), a config name shipped with oars (from
a folder outside the repository), an export folder (the runtime predictor, the same Result objects), ``info()``
and ``names``; and ``predict``'s knobs (conf, iou, max_det, classes, imgsz, save, stream) against what
``tools/infer.py`` writes with the same settings as ``-o`` overrides.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import runpy
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from demo_utils import DET_DEMO_CFG, ROOT, det_demo_overrides

from oars.errors import OarsError
from oars_deploy.errors import UserError

SHRINK = {"model.backbone.base_channels": 4, "model.test_cfg.score_thr": 0.0}


@pytest.fixture(scope="module")
def det(demo_data, tmp_path_factory):
    """A shrunk YOLOv3 with random weights saved as oars training saves it (``meta.config_yaml``, classes), its
    overrides and the folder of validation images."""
    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import config_to_yaml, load_config
    from oars.engine.runner import shareable_config
    from oars.tasks import get_task

    opts = det_demo_overrides(demo_data, **SHRINK)
    cfg = load_config(DET_DEMO_CFG, opts)
    get_task(cfg.default_scope, DET_DEMO_CFG).import_registries()
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        net = MODELS.build(copy.deepcopy(cfg.model))
    folder = tmp_path_factory.mktemp("api_run") / "yolo_tiny"
    folder.mkdir()
    ckpt = str(folder / "epoch_1.pth")
    torch.save({"state_dict": net.state_dict(),
                "meta": {"dataset_meta": {"classes": ["circle", "square", "triangle"]},
                         "config_yaml": config_to_yaml(shareable_config(cfg))}}, ckpt)
    return ckpt, opts, os.path.join(demo_data, "images", "val")


def _infer_records(ckpt: str, opts: list[str], images: str, out) -> list[dict]:
    """``tools/infer.py -c CFG -w CKPT -i IMAGES -o OUT`` (in-process) and its results.jsonl records."""
    runpy.run_path(os.path.join(ROOT, "tools", "infer.py"))["main"](
        ["-c", DET_DEMO_CFG, "-w", ckpt, "-i", images, "-o", str(out), *opts])
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_model_from_checkpoint_predicts_as_config_and_weights(det):
    from oars import Model

    ckpt, opts, images = det
    from_ckpt = Model(ckpt)  # no config given: the one stored in the checkpoint
    assert from_ckpt.weights == ckpt and from_ckpt.config.endswith("yolo_tiny.yaml")
    assert from_ckpt.names == {0: "circle", 1: "square", 2: "triangle"}
    from_cfg = Model(DET_DEMO_CFG, weights=ckpt, overrides=opts)
    got, want = from_ckpt.predict(images), from_cfg.predict(images)
    assert len(got) == len(os.listdir(images)) and sum(len(r.boxes) for r in got) > 0
    assert [r.to_dict() for r in got] == [r.to_dict() for r in want]
    with pytest.raises(OarsError, match="the checkpoint is the weights"):
        Model(ckpt, weights=ckpt)


def test_checkpoint_without_stored_config_is_named(tmp_path):
    import torch

    from oars import Model

    bare = str(tmp_path / "bare.pth")
    torch.save({"state_dict": {}, "meta": {}}, bare)
    with pytest.raises(OarsError, match=r"bare.pth stores no config .*Model\(CONFIG, weights="):
        Model(bare)
    with pytest.raises(OarsError, match="checkpoint not found"):
        Model(str(tmp_path / "missing.pth"))
    (tmp_path / "junk.pth").write_text("not a checkpoint")
    with pytest.raises(OarsError, match="not a readable PyTorch checkpoint"):
        Model(str(tmp_path / "junk.pth"))


def test_config_name_resolves_outside_the_repository(tmp_path):
    """A fresh interpreter in a temp folder (not the repository): names come from the installed package."""
    base = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
    (tmp_path / "my_local.yaml").write_text(f"_base_: {base}\n")
    code = textwrap.dedent("""
        import os
        from oars import Model
        from oars.errors import OarsError
        a = Model("fcos_r50_fpn_1x_coco")
        b = Model("detection/fcos/fcos_r50_fpn_1x_coco.yaml")
        assert a.config == b.config and a.config.endswith(os.path.join("fcos", "fcos_r50_fpn_1x_coco.yaml")), a.config
        assert not a.config.startswith(os.getcwd())
        assert a.cfg.model.bbox_head.type == "FCOSHead"  # its _base_ chain loads from the installed folder
        assert Model("my_local").config == "my_local.yaml"  # then the current folder
        try:
            Model("fcos_r50_fpn_1x_cooc")
        except OarsError as err:
            assert "Did you mean: fcos_r50_fpn_1x_coco" in str(err), err
        else:
            raise AssertionError("an unknown name was accepted")
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_info_counts_as_get_flops(det, capsys):
    from oars import Model
    from oars.analysis.config_model import build_count_target
    from oars.analysis.flops import count_flops

    ckpt, opts, _ = det
    model = Model(DET_DEMO_CFG, weights=ckpt, overrides=opts)
    info = model.info()
    target = build_count_target(model.cfg)
    report = count_flops(target.module, target.inputs, target.input_names)
    assert info["parameters"] == report.model_params > 0 and info["flops"] == report.flops > 0
    assert info["input_size"] == [1, 3, 128, 128] and info["classes"] == 3
    printed = capsys.readouterr().out
    assert "parameters" in printed and "FLOPs" in printed and "YOLOv3" in printed


def test_knobs_match_tools_infer_overrides(det, tmp_path):
    """conf / iou / max_det are the model's test_cfg keys: the records equal tools/infer.py's with those ``-o``."""
    from oars import Model

    ckpt, opts, images = det
    model = Model(DET_DEMO_CFG, weights=ckpt, overrides=opts)
    everything = model.predict(images)
    scores = np.concatenate([r.boxes.conf for r in everything])
    conf = float(np.median(scores))
    knobs = ["model.test_cfg.score_thr=" + json.dumps(conf), "model.test_cfg.nms.iou_threshold=0.3",
             "model.test_cfg.max_per_img=4"]
    expected = _infer_records(ckpt, [*opts, *knobs], images, tmp_path / "cli")
    got = model.predict(images, conf=conf, iou=0.3, max_det=4)
    assert [r.to_dict() for r in got] == expected
    assert all(len(r.boxes) <= 4 and (r.boxes.conf >= conf).all() for r in got)
    assert sum(len(r.boxes) for r in got) < sum(len(r.boxes) for r in everything)
    # classes: only those ids, the others' boxes gone
    only = model.predict(images, classes=[1])
    assert all(set(r.boxes.cls.tolist()) <= {1} for r in only)
    assert sum(len(r.boxes) for r in only) == sum(int((r.boxes.cls == 1).sum()) for r in everything) > 0


@pytest.mark.parametrize("kwargs, message", [
    ({"conf": 1.5}, r"conf=1.5\): expected a number from 0 to 1"),
    ({"max_det": 0}, r"max_det=0\): expected a whole number"),
    ({"classes": ["a"]}, r"classes=\['a'\]\): expected class ids"),
    ({"imgsz": [1, 2, 3]}, r"imgsz=\[1, 2, 3\]\): expected a size"),
])
def test_bad_knobs_named(det, kwargs, message):
    from oars import Model

    ckpt, opts, images = det
    with pytest.raises(OarsError, match=message):
        Model(DET_DEMO_CFG, weights=ckpt, overrides=opts).predict(images, **kwargs)


def test_knob_a_model_has_no_key_for(trained_unet):
    """A segmentor has no score threshold or per-object classes: one message naming the argument."""
    model, image = trained_unet
    with pytest.raises(OarsError, match=r"conf=0.5\).*no test-time score_thr.*conf does not apply"):
        model.predict(image, conf=0.5)
    with pytest.raises(OarsError, match=r"classes=\.\.\.\): predictor 'semantic_labels'.*no per-object classes"):
        model.predict(image, classes=[1])


@pytest.fixture(scope="module")
def trained_unet(demo_data, tmp_path_factory):
    """The shrunk segmentation demo with random weights (what the knob messages need)."""
    from demo_utils import DEMO_CFG, demo_overrides, random_checkpoint

    from oars import Model

    opts = demo_overrides(demo_data)
    ckpt = random_checkpoint(DEMO_CFG, opts, tmp_path_factory.mktemp("unet"))
    image = os.path.join(demo_data, "images", "val", "0000.png")
    return Model(DEMO_CFG, weights=ckpt, overrides=opts), image


def test_save_never_overwrites_and_stream_is_lazy(det, tmp_path, monkeypatch):
    from oars import Model

    ckpt, opts, images = det
    monkeypatch.chdir(tmp_path)
    model = Model(ckpt)
    model.predict(images, save=True)
    model.predict(images, save=True)
    stems = sorted(os.path.splitext(f)[0] for f in os.listdir(images))
    assert sorted(os.listdir("runs")) == ["predict", "predict2"]
    assert sorted(os.path.splitext(f)[0] for f in os.listdir("runs/predict2")) == stems
    gen = model.predict(images, stream=True)
    assert inspect.isgenerator(gen)
    first = next(gen)
    assert first.path == os.path.join(images, sorted(os.listdir(images))[0]) and len(list(gen)) == len(stems) - 1


@pytest.fixture(scope="module")
def exported(det, tmp_path_factory):
    from oars import Model

    ckpt, opts, _ = det
    model = Model(DET_DEMO_CFG, weights=ckpt, overrides=opts)
    return model, model.export("onnx", out_dir=str(tmp_path_factory.mktemp("exp") / "export"))


@pytest.mark.slow  # the ONNX export of the shrunk YOLOv3: ~30 s on one CPU thread
def test_export_folder_predicts_like_the_checkpoint(det, exported, capsys):
    from oars import Model
    from oars_deploy.predictor import Predictor
    from oars_deploy.result import Result

    _, _, images = det
    torch_model, folder = exported
    model = Model(folder)
    got = model.predict(images)
    want = torch_model.predict(images)
    assert all(isinstance(r, Result) for r in got) and [r.path for r in got] == [r.path for r in want]
    for g, w in zip(got, want):  # ONNX Runtime vs PyTorch: the top boxes agree within the export's tolerance
        top = min(5, len(w.boxes), len(g.boxes))
        np.testing.assert_allclose(g.boxes.xyxy[:top], w.boxes.xyxy[:top], atol=1e-2)
        np.testing.assert_allclose(g.boxes.conf[:top], w.boxes.conf[:top], atol=1e-3)
        assert g.boxes.cls[:top].tolist() == w.boxes.cls[:top].tolist()
    runtime = Predictor(folder).results(images)
    assert [r.to_dict() for r in runtime] == [r.to_dict() for r in got]  # the same objects as the runtime's
    assert model.names == {0: "circle", 1: "square", 2: "triangle"}
    info = model.info()
    assert info["predictor"] == "detection_boxes" and info["parameters"] is None and info["classes"] == 3
    with pytest.raises(OarsError, match=r"predict\(conf, max_det\): the export .* runs NMS inside its graph"):
        model.predict(images, conf=0.5, max_det=3)  # fixed at export: said, not ignored
    for call in (model.train, model.val, model.export):
        with pytest.raises(OarsError, match="is an export folder: it predicts"):
            call()
    with pytest.raises(OarsError, match="imgsz=64.*export again"):
        model.predict(images, imgsz=64)
    with pytest.raises(OarsError, match="give no weights"):
        Model(folder, weights="x.pth")


def test_a_folder_that_is_no_export(tmp_path):
    from oars import Model

    with pytest.raises(OarsError, match="folder without deploy.yaml"):
        Model(str(tmp_path))
    with pytest.raises(UserError, match="not found as a config file"):
        Model(str(tmp_path / "nope.yaml"))


def test_export_knobs_set_the_runtime_postprocess(demo_data, tmp_path):
    """An export whose NMS runs in the runtime (raw outputs): conf, iou, max_det set deploy.yaml's postprocess
    keys for the call; classes filters. The tiny detector scores its one box 0.9 (class a) and 0.1 (class b)."""
    from tiny_exports import tiny_detector_dir

    from oars import Model

    model = Model(tiny_detector_dir(str(tmp_path / "tiny")))
    image = os.path.join(demo_data, "images", "val", "0000.png")
    assert [r.boxes.cls.tolist() for r in model.predict(image)] == [[0, 1]]
    assert [r.boxes.cls.tolist() for r in model.predict(image, conf=0.5)] == [[0]]
    assert [r.boxes.cls.tolist() for r in model.predict(image, max_det=1)] == [[0]]
    assert [r.boxes.cls.tolist() for r in model.predict(image, classes=[1])] == [[1]]
    assert [r.boxes.cls.tolist() for r in model.predict(image)] == [[0, 1]]  # the knobs held for one call only
