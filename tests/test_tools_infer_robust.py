"""tools/infer.py and tools/export.py on awkward inputs: an unreadable file in a folder, a 2000x3 image, a huge
image's memory, an output path that is a file."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest
import torch
from demo_utils import DEMO_CFG, DET_DEMO_CFG, demo_overrides, det_demo_overrides, random_checkpoint, run_tool
from PIL import Image

from oars.config import load_config
from oars_deploy.errors import UserError
from oars_deploy.failures import Failures, FolderFailuresError


@pytest.fixture(scope="module")
def seg_case(demo_data, tmp_path_factory):
    opts = demo_overrides(demo_data)
    return opts, random_checkpoint(DEMO_CFG, opts, tmp_path_factory.mktemp("seg_ckpt"))


@pytest.fixture(scope="module")
def det_case(demo_data, tmp_path_factory):
    # keep_ratio at test time, so that a thin image reaches the keep-ratio size rule
    opts = det_demo_overrides(demo_data, **{"test_dataloader.dataset.pipeline.2.keep_ratio": True})
    return opts, random_checkpoint(DET_DEMO_CFG, opts, tmp_path_factory.mktemp("det_ckpt"))


def _folder_with_a_bad_file(demo_data: str, folder) -> str:
    """Two demo images and one file that is not an image, in one folder."""
    os.makedirs(folder, exist_ok=True)
    val = os.path.join(demo_data, "images", "val")
    for name in sorted(os.listdir(val))[:2]:
        cv2.imwrite(os.path.join(folder, name), cv2.imread(os.path.join(val, name)))
    with open(os.path.join(folder, "broken.png"), "wb") as f:
        f.write(b"not a png at all")
    return str(folder)


# ----------------------------------------------------------------------------- failures summary
def test_failures_summary_lists_every_file_and_raises_a_user_error():
    failures = Failures()
    assert len(failures) == 0 and failures.summary() == ""
    failures.raise_if_any(total=3)  # nothing failed: no error
    failures.add("a/x.png", "could not read image (unsupported or corrupt file): a/x.png")
    failures.add("a/y.jpg", "image file not found: a/y.jpg")
    assert len(failures) == 2
    with pytest.raises(UserError) as err:
        failures.raise_if_any(total=5)
    text = str(err.value)
    assert text.splitlines()[0] == "2 of 5 images could not be read:"
    assert "  - a/x.png: could not read image" in text and "  - a/y.jpg: image file not found" in text


# ----------------------------------------------------------------------------- a folder with an unreadable file
def test_infer_folder_writes_the_readable_images_and_lists_the_unreadable(seg_case, demo_data, tmp_path):
    opts, ckpt = seg_case
    images = _folder_with_a_bad_file(demo_data, tmp_path / "images")
    out = tmp_path / "out"
    proc = run_tool("infer.py", "-c", DEMO_CFG, "-w", ckpt, "-i", images, "-o", str(out), *opts, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "error: 1 of 3 images could not be read:" in proc.stderr
    assert "broken.png: could not read image" in proc.stderr
    assert "wrote 2 pictures" in proc.stdout
    assert len(list(out.glob("*_vis.png"))) == 2
    assert len([p for p in out.glob("*.png") if not p.name.endswith("_vis.png")]) == 2


def test_detection_infer_writes_detections_json_for_the_readable_images(det_case, demo_data, tmp_path):
    from detection.apis import run_inference

    opts, ckpt = det_case
    images = _folder_with_a_bad_file(demo_data, tmp_path / "images")
    out = tmp_path / "out"
    with pytest.raises(FolderFailuresError, match=r"1 of 3 images could not be read:\n  - .*broken\.png"):
        run_inference(load_config(DET_DEMO_CFG, opts), ckpt, images, str(out))
    assert len(list(out.glob("*_vis.png"))) == 2
    records = json.loads((out / "detections.json").read_text())
    assert len(records["images"] if isinstance(records, dict) else records) == 2


# ----------------------------------------------------------------------------- a 2000x3 image
def test_thin_image_is_predicted_not_a_crash(seg_case, det_case, tmp_path):
    from detection.apis import run_inference as det_infer
    from segmentation.apis import run_inference as seg_infer

    folder = tmp_path / "thin"
    folder.mkdir()
    cv2.imwrite(str(folder / "thin.png"), np.random.default_rng(0).integers(0, 256, (3, 2000, 3), dtype=np.uint8))
    opts, ckpt = seg_case
    seg_infer(load_config(DEMO_CFG, opts), ckpt, str(folder), str(tmp_path / "seg"))
    assert np.array(Image.open(tmp_path / "seg" / "thin.png")).shape == (3, 2000)
    opts, ckpt = det_case
    det_infer(load_config(DET_DEMO_CFG, opts), ckpt, str(folder), str(tmp_path / "det"))
    assert (tmp_path / "det" / "thin_vis.png").exists()


def test_resize_rule_keeps_one_pixel_per_side():
    from oars.data.transforms import Resize, rescale_size
    from oars_deploy.preprocess import fit_inside

    assert rescale_size(2000, 3, (64, 64)) == (64, 1)
    assert fit_inside(2000, 3, (64, 64)) == (64, 1)
    assert fit_inside(3, 2000, (64, 64)) == (1, 64)
    out = Resize(scale=64, keep_ratio=True)({"img": np.zeros((3, 2000, 3), np.uint8)})
    assert out["img"].shape == (1, 64, 3) and out["img_shape"] == (1, 64)


# ----------------------------------------------------------------------------- memory of a large image
@pytest.mark.parametrize("size,align_corners", [((97, 130), False), ((64, 64), False), ((300, 41), True),
                                                ((5, 7), False)])
def test_upsample_argmax_equals_the_full_resize(size, align_corners):
    from segmentation.apis.labels import upsample_argmax
    from segmentation.models.utils import resize

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 16, 21, generator=g)
    logits[2, :4] = logits[4, :4]  # exact ties: the lower class wins, as argmax
    full = resize(logits[None], size, align_corners)[0].argmax(0)
    got = upsample_argmax(logits, size, align_corners)
    assert got.dtype == torch.uint8 and got.shape == size
    assert torch.equal(got.long(), full)


def test_infer_predict_keeps_logits_at_the_model_size(seg_case, demo_data):
    """tools/infer.py's predict path gives model.predict's labels without the full-size C x H x W logits."""
    from mmengine.dataset import pseudo_collate

    from oars.inference import build_test_pipeline
    from oars.pipelines.model import init_model
    from segmentation.apis.inference import ANNOTATION_LOADERS, predict_labels

    opts, ckpt = seg_case
    cfg = load_config(DEMO_CFG, opts)
    model = init_model(cfg, ckpt)
    pipeline = build_test_pipeline(cfg, drop=ANNOTATION_LOADERS)
    val = os.path.join(demo_data, "images", "val")
    paths = [os.path.join(val, n) for n in sorted(os.listdir(val))[:2]]
    with torch.no_grad():
        reference = model.test_step(pseudo_collate([pipeline({"img_path": p}) for p in paths]))
        got = predict_labels(model, pseudo_collate([pipeline({"img_path": p}) for p in paths]))
    for ref, sample in zip(reference, got):
        assert tuple(sample.seg_logits.data.shape[-2:]) == tuple(sample.img_shape) == (64, 64)
        assert tuple(sample.ori_shape) == (128, 128)
        assert torch.equal(sample.pred_sem_seg.data.long(), ref.pred_sem_seg.data)


def test_large_picture_is_drawn_scaled_down():
    from segmentation.apis.inference import picture_inputs

    img, label = np.zeros((3000, 1500, 3), np.uint8), np.ones((3000, 1500), np.uint8)
    small_img, small_label = picture_inputs(img, label, max_side=600)
    assert small_img.shape == (600, 300, 3) and small_label.shape == (600, 300) and small_label.dtype == np.uint8
    same_img, same_label = picture_inputs(img[:500, :400], label[:500, :400], max_side=600)
    assert same_img.shape == (500, 400, 3) and same_label.shape == (500, 400)  # small enough: as it is


# ----------------------------------------------------------------------------- output path is a file
def test_export_output_that_is_a_file_is_one_message(tmp_path):
    target = tmp_path / "model.onnx"
    target.write_text("x")
    proc = run_tool("export.py", "-c", DEMO_CFG, "-w", str(tmp_path / "none.pth"), "-o", str(target), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"-o {target}: is a file; the output must be a folder" in proc.stderr
    proc = run_tool("export.py", "-c", DEMO_CFG, "-w", str(tmp_path / "none.pth"), "-o", str(target / "sub"),
                    check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "which is a file" in proc.stderr
