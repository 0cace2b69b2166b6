"""The Python predictor (oars_deploy) end to end: export the (shrunk, random-weight) demo models, run
deploy/python/infer.py with torch blocked, and compare its files with tools/infer.py's on the same images and
checkpoint.

Segmentation is exported with ``output_op: none`` so the comparison is exact (the predictor resizes the logits
bilinearly, then takes the argmax, as the segmentor does); the argmax-in-graph path is checked in
test_deploy_python_preprocess.py. Images are square so that the export input (fixed 64x64 / 128x128) is what
the PyTorch pipeline feeds too (non-square images are padded further at deploy time).
"""

from __future__ import annotations

import copy
import json
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from mmengine.registry import MODELS, DefaultScope
from PIL import Image
from tiny_exports import tiny_detector_dir as _tiny_detector_dir
from tiny_exports import tiny_segmentor_dir as _tiny_model_dir

from oars.config import load_config
from oars_deploy.cli import run as infer_main
from oars_deploy.errors import DeployError, UserError
from oars_deploy.predictor import Predictor
from oars_deploy.records import read_results

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
INFER = osp.join(ROOT, "deploy/python/infer.py")
SEG_CFG = osp.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
DET_CFG = osp.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
SEG_OVERRIDES = ["model.backbone.base_channels=4", "model.decode_head.channels=4", "export.output_op=none"]
DET_OVERRIDES = ["model.backbone.base_channels=4"]

# Any import of torch, torchvision or mmengine fails in the predictor's process.
BLOCK_TORCH = """
import importlib.abc, runpy, sys
class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'torchvision', 'mmengine'):
            raise ImportError('blocked in this test: ' + name)
        return None
sys.meta_path.insert(0, _NoTorch())
"""



def run_without_torch(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + code, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def run_infer_without_torch(*args: str) -> subprocess.CompletedProcess:
    code = f"sys.argv = [{INFER!r}] + sys.argv[1:]\nrunpy.run_path({INFER!r}, run_name='__main__')\n"
    return run_without_torch(code, *args)


def _images(folder: str, sizes: list[int]) -> str:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, size in enumerate(sizes):
        img = np.full((size, size, 3), 40 + 30 * i, np.uint8)
        img += rng.integers(0, 20, img.shape, dtype=np.uint8)
        cv2.circle(img, (size // 3, size // 2), size // 5, (230, 60, 60), -1)
        cv2.rectangle(img, (size // 2, size // 4), (size - 10, size // 2), (60, 190, 90), -1)
        cv2.imwrite(osp.join(folder, f"img{i}.png"), img)
    return folder


def _random_checkpoint(cfg_path: str, overrides: list[str], path: str) -> str:
    cfg = load_config(cfg_path, overrides)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        torch.manual_seed(0)
        model = MODELS.build(copy.deepcopy(cfg.model))
    ds = cfg.test_dataloader.dataset
    meta = {"dataset_meta": {"classes": list(ds.classes), "palette": [list(p) for p in ds.palette]}}
    torch.save({"state_dict": model.state_dict(), "meta": meta}, path)
    return path


def _export(tmp, cfg_path: str, overrides: list[str]) -> tuple[str, str]:
    from oars.pipelines.export import export_model

    ckpt = _random_checkpoint(cfg_path, overrides, str(tmp / "model.pth"))
    out = str(tmp / "export")
    export_model(cfg_path, ckpt, out, overrides=overrides)
    return ckpt, out


def _tools_infer(cfg_path: str, ckpt: str, images: str, out: str, overrides: list[str]) -> None:
    """What tools/infer.py -c CFG -w CKPT -i IMAGES -o OUT OVERRIDES... runs, in this process (no second start-up)."""
    import importlib

    from oars.engine.entry import load

    cfg = load(cfg_path, overrides)
    importlib.import_module(f"{cfg.default_scope}.apis").run_inference(cfg, ckpt, images, out)


def test_predictor_modules_import_without_torch():
    proc = run_without_torch("import oars_deploy.predictor, oars_deploy.outputs, oars_deploy.cli\n"
                             "print('torch' in sys.modules, 'mmengine' in sys.modules)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False"]


def test_segmentation_end_to_end_matches_tools_infer(tmp_path):
    ckpt, model_dir = _export(tmp_path, SEG_CFG, SEG_OVERRIDES)
    images = _images(str(tmp_path / "images"), [128, 128, 96])
    _tools_infer(SEG_CFG, ckpt, images, str(tmp_path / "torch"), SEG_OVERRIDES)
    proc = run_infer_without_torch("--model-dir", model_dir, "-i", images, "-o", str(tmp_path / "deploy"),
                                   "--benchmark", "--warmup", "1", "--runs", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wrote 3 pictures" in proc.stdout and "end_to_end" in proc.stdout and "images/s" in proc.stdout
    for i in range(3):
        ref = np.asarray(Image.open(tmp_path / "torch" / f"img{i}.png"))
        got = np.asarray(Image.open(tmp_path / "deploy" / f"img{i}.png"))
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        vis_ref = cv2.imread(str(tmp_path / "torch" / f"img{i}_vis.png"))
        vis_got = cv2.imread(str(tmp_path / "deploy" / f"img{i}_vis.png"))
        np.testing.assert_array_equal(vis_got, vis_ref)
    # results.jsonl: the same records from both (the same label maps, so the same sizes and pixel counts)
    ref_results, got_results = read_results(str(tmp_path / "torch")), read_results(str(tmp_path / "deploy"))
    assert got_results == ref_results and len(got_results) == 3
    assert {r["predictor"] for r in got_results} == {"semantic_labels"}


@pytest.mark.parametrize("in_graph_nms", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["nms", "raw"])
def test_detection_end_to_end_matches_tools_infer(tmp_path, in_graph_nms):
    overrides = DET_OVERRIDES + ([] if in_graph_nms else ["export.postprocess=false"])
    ckpt, model_dir = _export(tmp_path, DET_CFG, overrides)
    inside = Predictor(model_dir).post["inside_graph"]
    assert inside == (["decode", "nms"] if in_graph_nms else ["decode"])
    images = _images(str(tmp_path / "images"), [128, 160])
    _tools_infer(DET_CFG, ckpt, images, str(tmp_path / "torch"), DET_OVERRIDES)
    infer_main(["--model-dir", model_dir, "-i", images, "-o", str(tmp_path / "deploy"), "--draw-threshold", "0.2"])
    with open(tmp_path / "torch" / "detections.json") as f:
        ref = json.load(f)
    with open(tmp_path / "deploy" / "detections.json") as f:
        got = json.load(f)
    assert [r["image"] for r in got] == [r["image"] for r in ref]
    for r_got, r_ref in zip(got, ref):
        assert len(r_got["detections"]) == len(r_ref["detections"]) > 0
        for a, b in zip(r_got["detections"], r_ref["detections"]):
            assert (a["label"], a["class"]) == (b["label"], b["class"])
            # the JSON rounds boxes to 0.01 px: values within 1e-3 px may round 0.01 apart
            np.testing.assert_allclose(a["bbox"], b["bbox"], rtol=0, atol=0.01 + 1e-6)
            assert abs(a["score"] - b["score"]) <= 1e-4 + 1e-5
    for i in range(2):
        assert osp.isfile(tmp_path / "deploy" / f"img{i}_vis.png")
    # results.jsonl: one detection_boxes record per image on both sides, with detections.json's detections
    ref_results, got_results = read_results(str(tmp_path / "torch")), read_results(str(tmp_path / "deploy"))
    for results, detections in ((ref_results, ref), (got_results, got)):
        assert [sorted(r) for r in results] == [["detections", "image_size", "input", "predictor"]] * 2
        assert [r["predictor"] for r in results] == ["detection_boxes"] * 2
        assert [r["detections"] for r in results] == [d["detections"] for d in detections]
    assert [r["input"] for r in got_results] == [r["input"] for r in ref_results]
    assert [r["image_size"] for r in got_results] == [r["image_size"] for r in ref_results] == [[128, 128], [160, 160]]
    for a, b in zip(got_results, ref_results):
        assert [d["label"] for d in a["detections"]] == [d["label"] for d in b["detections"]]


# ----------------------------------------------------------------------------- batching and errors (tiny ONNX)
@pytest.mark.parametrize("batch", [-1, 1, 2], ids=["dynamic", "static1", "static2"])
def test_predictor_batches_like_single_images(tmp_path, batch):
    model_dir, _ = _tiny_model_dir(str(tmp_path / "m"), batch)
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(40, 64), (32, 32), (50, 20)]]
    predictor = Predictor(model_dir)
    together = predictor.predict(images)
    alone = [predictor.predict([img])[0] for img in images]
    for img, a, b in zip(images, together, alone):
        assert a["label"].shape == img.shape[:2]
        np.testing.assert_array_equal(a["label"], b["label"])


def test_infer_cli_errors(tmp_path):
    model_dir, _ = _tiny_model_dir(str(tmp_path / "m"), -1)
    img_dir = _images(str(tmp_path / "images"), [40])
    out = str(tmp_path / "out")
    with pytest.raises(UserError, match="deploy file not found"):
        infer_main(["--model-dir", str(tmp_path), "-i", img_dir, "-o", out])
    with pytest.raises(DeployError, match="applies to detection"):
        infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", out, "--draw-threshold", "0.5"])
    with pytest.raises(UserError, match="neither an image file nor a folder"):
        infer_main(["--model-dir", model_dir, "-i", str(tmp_path / "nope"), "-o", out])
    with pytest.raises(DeployError, match="no engine"):
        infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", out, "--backend", "tensorrt", "--device", "cuda"])
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(DeployError, match="no CUDAExecutionProvider"):
            infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", out, "--device", "cuda"])
    infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", out])
    assert sorted(os.listdir(out)) == ["img0.png", "img0_vis.png", "results.jsonl"]


def test_infer_cli_reports_errors_without_traceback(tmp_path):
    proc = run_infer_without_torch("--model-dir", str(tmp_path), "-i", str(tmp_path / "images"), "-o",
                                   str(tmp_path / "o"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: deploy file not found") and "Traceback" not in proc.stderr


@pytest.mark.gpu
def test_cuda_predictor_matches_cpu(tmp_path):
    """--device cuda (ONNX Runtime's CUDAExecutionProvider; CuPy pre/post-processing when installed) == CPU."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)")
    model_dir, _ = _tiny_model_dir(str(tmp_path / "m"), -1)
    rng = np.random.default_rng(2)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(40, 64), (50, 20)]]
    cpu = Predictor(model_dir).predict(images)
    cuda = Predictor(model_dir, device="cuda").predict(images)
    for a, b in zip(cpu, cuda):
        assert (a["label"] != b["label"]).mean() < 1e-3  # float differences between the providers at ties only


@pytest.mark.parametrize("hw", [(3, 2000), (2000, 3), (1, 1)], ids=["3x2000", "2000x3", "1x1"])
def test_extreme_aspect_ratios_predict(tmp_path, hw):
    """keep_ratio fits a 2000x3 image into 32x32 as 32x1, not 32x0 (which OpenCV's resize refused)."""
    model_dir, _ = _tiny_model_dir(str(tmp_path / "m"), -1)
    img = np.random.default_rng(3).integers(0, 256, (*hw, 3), dtype=np.uint8)
    predictor = Predictor(model_dir)
    _, metas = predictor.preprocess([img])
    assert min(metas[0]["img_shape"]) >= 1 and max(metas[0]["img_shape"]) == 32
    assert predictor.predict([img])[0]["label"].shape == hw


def test_folder_with_an_unreadable_file_writes_the_others(tmp_path, capsys):
    """One corrupt and one vanished file: the readable images are written, the failures listed, exit status 2."""
    from oars_deploy.cli import main
    from oars_deploy.failures import FolderFailuresError

    model_dir, _ = _tiny_model_dir(str(tmp_path / "m"), -1)
    img_dir = _images(str(tmp_path / "images"), [40, 48])
    (tmp_path / "images" / "broken.png").write_bytes(b"not a png")
    out = tmp_path / "out"
    with pytest.raises(FolderFailuresError) as err:
        infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", str(out), "--batch-size", "2"])
    assert str(err.value).startswith("1 of 3 images could not be read:")
    assert "broken.png" in str(err.value) and "unsupported or corrupt" in str(err.value)
    assert sorted(os.listdir(out)) == ["img0.png", "img0_vis.png", "img1.png", "img1_vis.png", "results.jsonl"]
    assert [osp.basename(r["input"]) for r in read_results(str(out))] == ["img0.png", "img1.png"]
    with pytest.raises(SystemExit) as exit_info:
        main(["--model-dir", model_dir, "-i", img_dir, "-o", str(tmp_path / "out2")])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "wrote 2 pictures" in captured.out
    assert captured.err.startswith("error: 1 of 3 images could not be read:") and "broken.png" in captured.err


def test_detection_folder_failures_keep_detections_json(tmp_path):
    """detections.json holds the readable images when another one fails (tiny raw-output detector)."""
    model_dir = _tiny_detector_dir(str(tmp_path / "m"))
    img_dir = _images(str(tmp_path / "images"), [40])
    (tmp_path / "images" / "broken.jpg").write_bytes(b"\xff\xd8 truncated")
    out = tmp_path / "out"
    with pytest.raises(UserError, match="1 of 2 images could not be read"):
        infer_main(["--model-dir", model_dir, "-i", img_dir, "-o", str(out)])
    with open(out / "detections.json") as f:
        records = json.load(f)
    assert [osp.basename(r["image"]) for r in records] == ["img0.png"]
