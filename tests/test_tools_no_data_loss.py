"""Nothing the user had is lost: outputs never replace inputs, exports never replace exports, converters never
replace a file unasked, and a damaged model file or a bad --opset is one clear message.

The tools are run as a user runs them: from the user's own folder (``cwd``), with relative paths.
"""

from __future__ import annotations

import importlib
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
import yaml
from demo_utils import DEMO_CFG, ROOT, demo_overrides, random_checkpoint
from file_digests import digest

from oars.export.errors import ExportError
from oars.export.guards import DEFAULT_OPSET, MIN_OPSET, check_opset, max_opset
from oars_deploy.output_paths import OutputPathError, check_new_file, check_output_folder, describe_export

VIDEO_CFG = osp.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
SEG_SHRINK = ["model.backbone.base_channels=4", "model.decode_head.channels=4"]


def run_in(cwd, tool: str, *args: str) -> subprocess.CompletedProcess:
    """``python <repo>/<tool> ARGS`` started in ``cwd`` (relative paths resolve there, as for a user)."""
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    env["PYTHONPATH"] = os.pathsep.join([ROOT, osp.join(ROOT, "deploy/python"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, osp.join(ROOT, tool), *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=600, env=env)


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit status 2, one message, no traceback, every needle in it."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr[-3000:])


@pytest.fixture()
def images(tmp_path):
    """A user's folder ``tmp_path/imgs`` with two small images."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(2):
        cv2.imwrite(str(folder / f"a{i}.png"), np.full((32, 32, 3), 60 * i, np.uint8))
    return folder


# ----------------------------------------------------------------------------- the one output rule
@pytest.mark.parametrize("output, relation", [
    ("imgs", "is the input folder"), ("imgs/", "is the input folder"), ("imgs/out", "is inside the input folder"),
    (".", "holds the input folder"), ("./imgs/../imgs", "is the input folder")])
def test_output_folder_may_not_be_hold_or_lie_inside_the_input(images, monkeypatch, output, relation):
    monkeypatch.chdir(images.parent)
    with pytest.raises(OutputPathError, match=relation):
        check_output_folder(output, "imgs")
    assert check_output_folder("out", "imgs") == "out"  # beside the input: fine


def test_output_folder_reached_through_a_link_is_the_same_folder(images, tmp_path):
    os.symlink(images, tmp_path / "link")
    with pytest.raises(OutputPathError, match="is the input folder"):
        check_output_folder(str(tmp_path / "link"), str(images))


def test_one_input_file_may_not_have_its_own_folder_as_output(images, monkeypatch):
    monkeypatch.chdir(images)
    with pytest.raises(OutputPathError, match="holds the input file -i a0.png"):
        check_output_folder(".", "a0.png")
    with pytest.raises(OutputPathError, match="holds the input file"):
        check_output_folder("..", "a0.png")
    assert check_output_folder("out", "a0.png") == "out"  # a new folder beside the file cannot hold it


def test_output_that_is_a_file_is_refused(images):
    with pytest.raises(OutputPathError, match="is a file; the output must be a folder"):
        check_output_folder(str(images / "a0.png"), None)


@pytest.mark.parametrize("task", ["segmentation", "detection", "video", "gan"])
def test_every_task_inference_refuses_before_loading_anything(images, task):
    """Each task's run_inference applies the rule first: no config, checkpoint or model is needed to be refused."""
    apis = importlib.import_module(f"{task}.apis")
    with pytest.raises(OutputPathError, match="is the input folder"):
        apis.run_inference(None, "no.pth", str(images), str(images))


def test_tools_infer_refuses_writing_into_the_input_folder(demo_data, images, tmp_path):
    """tools/infer.py -i DIR -o DIR (the U-Net demo wrote label maps over the images): refused, nothing changed."""
    ckpt = random_checkpoint(DEMO_CFG, demo_overrides(demo_data), tmp_path)
    before = digest(images)
    for out in ("imgs", "imgs/pred"):
        proc = run_in(tmp_path, "tools/infer.py", "-c", DEMO_CFG, "-w", "model.pth", "-i", "imgs", "-o", out,
                      *SEG_SHRINK)
        assert_user_error(proc, f"-o {out} ", "input folder -i imgs", "choose an output folder outside the input")
    assert digest(images) == before and ckpt


def test_predictor_refuses_writing_into_the_input_folder_and_into_a_file(images, tmp_path):
    """oars-infer: the same rule, checked before deploy.yaml is even read; -o naming a file is one message."""
    before = digest(images)
    proc = run_in(tmp_path, "deploy/python/infer.py", "--model-dir", "export", "-i", "imgs", "-o", "imgs")
    assert_user_error(proc, "-o imgs is the input folder -i imgs")
    proc = run_in(tmp_path, "deploy/python/infer.py", "--model-dir", "export", "-i", "imgs", "-o", "imgs/a0.png")
    assert_user_error(proc, "-o imgs/a0.png: is a file; the output must be a folder")
    assert digest(images) == before


# ----------------------------------------------------------------------------- a damaged model file
@pytest.mark.parametrize("damage", ["truncated", "not_onnx"])
def test_predictor_on_a_damaged_model_says_re_export(tmp_path, images, damage):
    import onnx
    from onnx import TensorProto, helper

    from oars.export.deploy_config import write_deploy_yaml

    folder = tmp_path / "export"
    folder.mkdir()
    graph = helper.make_graph([helper.make_node("ArgMax", ["image"], ["label"], axis=1, keepdims=0)], "g",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [1, 32, 32])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    (folder / "model.onnx").write_bytes(data[: len(data) // 2] if damage == "truncated" else b"<html>404</html>")
    deploy = {"version": 1, "model": {"name": "UNet", "task": "segmentation", "onnx": "model.onnx"},
              "labels": ["a", "b", "c"], "palette": [[0, 0, 0], [1, 1, 1], [2, 2, 2]],
              "input": {"name": "image", "shape": [1, 3, 32, 32], "dtype": "float32", "layout": "NCHW",
                        "color": "BGR"},
              "preprocess": [{"type": "Resize", "size": [32, 32], "keep_ratio": False, "interpolation": "linear"},
                             {"type": "Permute"}],
              "outputs": [{"name": "label", "shape": [1, 32, 32], "dtype": "int64"}],
              "postprocess": {"type": "none"}}
    write_deploy_yaml(str(folder / "deploy.yaml"), deploy)
    assert onnx  # imported for its helper
    proc = run_in(tmp_path, "deploy/python/infer.py", "--model-dir", "export", "-i", "imgs", "-o", "out")
    assert_user_error(proc, "model file export/model.onnx is damaged or not an ONNX model",
                      "re-export it with tools/export.py")


# ----------------------------------------------------------------------------- exports never replace exports
def _fake_export(folder) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(b"the user's Mask R-CNN graph")
    (folder / "deploy.yaml").write_text(yaml.safe_dump(
        {"model": {"name": "MaskRCNN", "exported_at": "2026-11-30T10:00:00+00:00"}}))
    return digest(folder)


def test_export_into_a_folder_holding_an_export_is_refused_then_replaced_with_overwrite(demo_data, tmp_path):
    opts = demo_overrides(demo_data)
    random_checkpoint(DEMO_CFG, opts, tmp_path)
    before = _fake_export(tmp_path / "export")
    proc = run_in(tmp_path, "tools/export.py", "-c", DEMO_CFG, "-w", "model.pth", "-o", "export", *opts)
    assert_user_error(proc, "export already holds an export: deploy.yaml, model.onnx (a MaskRCNN export of "
                      "2026-11-30T10:00:00+00:00)", "pass --overwrite")
    assert digest(tmp_path / "export") == before
    proc = run_in(tmp_path, "tools/export.py", "--overwrite", "-c", DEMO_CFG, "-w", "model.pth", "-o", "export",
                  *opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model = yaml.safe_load((tmp_path / "export/deploy.yaml").read_text())["model"]
    assert model["name"] == "EncoderDecoder" and model["opset"] == DEFAULT_OPSET
    assert model["exported_at"] > "2026-11-30T10:00:00+00:00"
    assert describe_export(str(tmp_path / "export")).endswith(f"(an EncoderDecoder export of {model['exported_at']})")


# ----------------------------------------------------------------------------- opset
def test_unsupported_opset_is_refused_with_the_range(tmp_path):
    proc = run_in(tmp_path, "tools/export.py", "-c", DEMO_CFG, "-w", "none.pth", "-o", "out", "--opset", "5")
    assert_user_error(proc, f"--opset 5 is not supported: the exporter writes ONNX opsets {MIN_OPSET} to "
                      f"{max_opset()}")
    assert not (tmp_path / "out").exists()
    for opset in (MIN_OPSET - 1, max_opset() + 1, True, "18"):
        with pytest.raises(ExportError, match="is not supported"):
            check_opset(opset)
    assert check_opset(MIN_OPSET) == MIN_OPSET and check_opset(max_opset()) == max_opset()


def test_opset_the_graph_cannot_be_converted_to_is_an_error_not_a_silent_18(tmp_path):
    """The exporter writes 18 and converts; when the conversion fails it keeps 18 without a word. oars says so."""
    from oars.export.onnx_export import dynamo_export

    class MeanScale(torch.nn.Module):  # ReduceMean with axes: no ONNX adapter from opset 18 down to 17
        def forward(self, x):
            return torch.nn.functional.interpolate(x.mean(dim=(2, 3), keepdim=True) * x, scale_factor=2.0)

    with pytest.raises(ExportError, match="could not convert the MeanScale graph to opset 17 .*--opset 18"):
        dynamo_export(MeanScale().eval(), (torch.randn(1, 2, 4, 4),), str(tmp_path / "m.onnx"), ["x"], ["y"], 17)
    dynamo_export(MeanScale().eval(), (torch.randn(1, 2, 4, 4),), str(tmp_path / "m.onnx"), ["x"], ["y"], 18)
    assert check_opset(DEFAULT_OPSET) == DEFAULT_OPSET


# ----------------------------------------------------------------------------- INT8 of a video model
def test_int8_export_of_a_video_model_calibrated_on_images_is_refused_with_the_reason(tmp_path, images):
    """A clip classifier calibrates on videos: a folder of pictures is one message, before the model is built."""
    torch.save({"state_dict": {}}, tmp_path / "tsm.pth")
    proc = run_in(tmp_path, "tools/export.py", "-c", VIDEO_CFG, "-w", "tsm.pth", "-o", "out", "--int8",
                  "--calib-dir", "imgs")
    assert_user_error(proc, "--calib-dir: no videos", "in folder imgs: it holds 2 still images",
                      "video models take video files")


# ----------------------------------------------------------------------------- converters: one rule
def test_new_file_rule():
    with pytest.raises(OutputPathError, match="exists already.*--overwrite"):
        check_new_file(__file__, overwrite=False)
    with pytest.raises(OutputPathError, match="is an input of this conversion"):
        check_new_file(__file__, overwrite=True, inputs=(__file__,))
    with pytest.raises(OutputPathError, match="is a folder"):
        check_new_file(ROOT, overwrite=True)


def _labelme_folder(folder) -> None:
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.zeros((20, 30, 3), np.uint8))
    doc = {"imagePath": "a.png", "imageHeight": 20, "imageWidth": 30,
           "shapes": [{"label": "box", "shape_type": "rectangle", "points": [[2, 2], [10, 12]]}]}
    (folder / "a.json").write_text(json.dumps(doc))


def test_labelme2coco_never_replaces_a_file_unasked(tmp_path):
    _labelme_folder(tmp_path / "lm")
    (tmp_path / "ann.json").write_text('{"the": "user\'s own file"}')
    proc = run_in(tmp_path, "tools/convert.py", "labelme2coco", "--input", "lm", "--out", "ann.json")
    assert_user_error(proc, "--out ann.json exists already; nothing was written (pass --overwrite")
    assert (tmp_path / "ann.json").read_text() == '{"the": "user\'s own file"}'
    proc = run_in(tmp_path, "tools/convert.py", "labelme2coco", "--input", "lm", "--out", "ann.json", "--overwrite")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "ann.json").read_text())["annotations"]


def test_voc2coco_and_torchvision2oars_refuse_an_existing_out(tmp_path):
    (tmp_path / "out.json").write_text("{}")
    proc = run_in(tmp_path, "tools/convert.py", "voc2coco", "--voc-root", "voc", "--split", "s.txt",
                  "--out", "out.json")
    assert_user_error(proc, "--out out.json exists already")
    (tmp_path / "tv.pth").write_bytes(b"x")
    (tmp_path / "oars.pth").write_bytes(b"y")
    proc = run_in(tmp_path, "tools/convert.py", "torchvision2oars", "--input", "tv.pth", "--out", "oars.pth")
    assert_user_error(proc, "--out oars.pth exists already")
    assert (tmp_path / "oars.pth").read_bytes() == b"y"


def test_labelme2seg_may_not_write_into_its_input_folder(tmp_path):
    _labelme_folder(tmp_path / "lm")
    proc = run_in(tmp_path, "tools/convert.py", "labelme2seg", "--input", "lm", "--out", "lm", "--overwrite")
    assert_user_error(proc, "--out lm is the input folder --input lm")
    assert sorted(os.listdir(tmp_path / "lm")) == ["a.json", "a.png"]


# ----------------------------------------------------------------------------- an image model fed a video
def test_image_model_inputs_name_a_video_or_feature_file_as_the_wrong_kind(tmp_path):
    from oars.data.transforms.loading import read_image as training_read
    from oars.errors import DataError
    from oars_deploy.errors import DeployError, UserError
    from oars_deploy.image_files import list_images
    from oars_deploy.outputs import read_image as predictor_read

    (tmp_path / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    (tmp_path / "feats.npz").write_bytes(b"PK\x03\x04")
    for read, error in ((training_read, DataError), (predictor_read, DeployError)):
        with pytest.raises(error, match=r"clip.mp4 is a video \(.mp4\), not an image: an image model takes"):
            read(str(tmp_path / "clip.mp4"))
        with pytest.raises(error, match=r"feats.npz is a frame-feature file \(.npz\), not an image"):
            read(str(tmp_path / "feats.npz"))
    with pytest.raises(UserError, match=r"no images .* it holds 1 frame-feature file \(feats.npz\) and 1 video"):
        list_images(str(tmp_path))


def test_eval_show_dir_may_not_go_into_the_data(demo_data, tmp_path):
    """tools/eval.py --show-dir inside the test set's data_root: refused before the model is built."""
    torch.save({"state_dict": {}}, tmp_path / "model.pth")
    proc = run_in(tmp_path, "tools/eval.py", "-c", DEMO_CFG, "-w", "model.pth", "--show-dir",
                  osp.join(demo_data, "images"), "-o", *demo_overrides(demo_data))
    assert_user_error(proc, f"--show-dir {demo_data}/images is inside the input folder "
                      f"test_dataloader.dataset.data_root {demo_data}")


def test_opencv_compat_never_rewrites_its_source_nor_another_export(tmp_path):
    """deploy/cpp/opencv_compat.py MODEL_DIR OUT_DIR: OUT_DIR may not be the source export, nor hold another one
    unless --overwrite (checked before the model is read)."""
    before = _fake_export(tmp_path / "export")
    proc = run_in(tmp_path, "deploy/cpp/opencv_compat.py", "export", "export")
    assert_user_error(proc, "OUT_DIR export is the input folder MODEL_DIR export")
    _fake_export(tmp_path / "other")
    proc = run_in(tmp_path, "deploy/cpp/opencv_compat.py", "export", "other")
    assert_user_error(proc, "other already holds an export: deploy.yaml, model.onnx (a MaskRCNN export of",
                      "pass --overwrite")
    assert digest(tmp_path / "export") == before
