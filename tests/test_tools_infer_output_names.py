"""tools/infer.py names its outputs as oars-infer does (:func:`oars_deploy.output_paths.output_stems`): ``x.png``
beside ``x.jpg`` in one folder give ``x_png.*`` and ``x_jpg.*`` (each written from its own input, its record naming
its own file) instead of one replacing the other; a file alone keeps its plain name (``img.png`` -> ``img.png`` +
``img_vis.png``); a name that still collides is one message naming both inputs, before anything is written.

Every task's inference, run as a user runs it: tools/infer.py's ``main`` from the user's folder with relative paths,
on random weights of a shrunk demo config (nothing is trained).
"""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, ROOT, load_tool, random_checkpoint, run_tool
from PIL import Image

from oars_deploy.output_paths import OutputPathError
from oars_deploy.records import read_results

SEG_SHRINK = ["model.backbone.base_channels=4", "model.decode_head.channels=4"]
VIDEO_CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
VIDEO_SHRINK = ["model.backbone.base_channels=8"]
GAN_CFG = os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_demo_shapes.yaml")
GAN_SHRINK = ["model.generator.ngf=4", "model.generator.num_downs=5", "model.discriminator.ndf=4",
              "model.discriminator.n_layers=1", "test_dataloader.dataset.pipeline.1.scale=32",
              "export.input_shape=[1,3,32,32]"]
SIZES = {"x.png": (40, 56), "x.jpg": (48, 32), "img.png": (36, 36)}  # (H, W): each output shows whose it is


@pytest.fixture(scope="module")
def infer():
    """tools/infer.py's ``main`` (in-process: no interpreter start per run)."""
    return load_tool("infer").main


@pytest.fixture()
def twins(tmp_path, monkeypatch):
    """The user's folder ``imgs`` (the working directory is its parent): ``x.png`` and ``x.jpg``, two different
    images of different sizes, and ``img.png`` whose name nothing else shares."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, (h, w) in SIZES.items():
        cv2.imwrite(str(folder / name), rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    monkeypatch.chdir(tmp_path)
    return folder


def _records(out) -> dict[str, dict]:
    """results.jsonl's records by the input's file name."""
    return {os.path.basename(r["input"]): r for r in read_results(str(out))}


# ----------------------------------------------------------------------------- segmentation
@pytest.fixture(scope="module")
def seg_ckpt(tmp_path_factory) -> str:
    return random_checkpoint(DEMO_CFG, SEG_SHRINK, tmp_path_factory.mktemp("seg_ckpt"))


def test_segmentation_twins_get_their_own_label_maps(infer, seg_ckpt, twins, tmp_path):
    infer(["-c", DEMO_CFG, "-w", seg_ckpt, "-i", "imgs", "-o", "out", *SEG_SHRINK])
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.png")) == ["img.png", "img_vis.png", "x_jpg.png", "x_jpg_vis.png",
                                                         "x_png.png", "x_png_vis.png"]
    records = _records(out)
    for name, label_png in (("x.png", "x_png.png"), ("x.jpg", "x_jpg.png"), ("img.png", "img.png")):
        assert records[name]["label_png"] == label_png  # each record names its own label map ...
        assert np.array(Image.open(out / label_png)).shape == SIZES[name]  # ... made from its own input
        assert records[name]["image_size"] == list(SIZES[name])


def test_segmentation_single_file_keeps_its_plain_name(infer, seg_ckpt, twins, tmp_path):
    infer(["-c", DEMO_CFG, "-w", seg_ckpt, "-i", "imgs/x.jpg", "-o", "one", *SEG_SHRINK])
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["results.jsonl", "x.png", "x_vis.png"]
    assert _records(tmp_path / "one")["x.jpg"]["label_png"] == "x.png"


def test_segmentation_name_that_still_collides_is_one_message(seg_ckpt, twins, tmp_path):
    """``x_vis.png`` beside ``x.png`` (and no ``x.jpg``): its label map and x.png's picture are both ``x_vis.png``;
    refused before anything is written."""
    (twins / "x.jpg").unlink()
    cv2.imwrite(str(twins / "x_vis.png"), np.zeros((8, 8, 3), np.uint8))
    proc = run_tool("infer.py", "-c", DEMO_CFG, "-w", seg_ckpt, "-i", "imgs", "-o", "out", *SEG_SHRINK,
                    check=False, cwd=str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "-i: the inputs imgs/x.png and imgs/x_vis.png would both be written as x_vis.png; rename one of them" \
        in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ----------------------------------------------------------------------------- detection
@pytest.fixture(scope="module")
def det_ckpt(tmp_path_factory) -> str:
    return random_checkpoint(DET_DEMO_CFG, [], tmp_path_factory.mktemp("det_ckpt"))


def test_detection_twins_get_their_own_pictures(infer, det_ckpt, twins, tmp_path):
    infer(["-c", DET_DEMO_CFG, "-w", det_ckpt, "-i", "imgs", "-o", "out"])
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.png")) == ["img_vis.png", "x_jpg_vis.png", "x_png_vis.png"]
    records = _records(out)
    for name, picture in (("x.png", "x_png_vis.png"), ("x.jpg", "x_jpg_vis.png"), ("img.png", "img_vis.png")):
        assert records[name]["image_size"] == list(SIZES[name])
        alone = tmp_path / f"alone_{name}"  # the picture the file alone gives, under its plain name
        infer(["-c", DET_DEMO_CFG, "-w", det_ckpt, "-i", f"imgs/{name}", "-o", str(alone)])
        plain = f"{os.path.splitext(name)[0]}_vis.png"
        assert [p.name for p in alone.glob("*.png")] == [plain]
        np.testing.assert_array_equal(cv2.imread(str(out / picture)), cv2.imread(str(alone / plain)))
        assert _records(alone)[name] == records[name]
    detections = json.loads((out / "detections.json").read_text())
    assert sorted(os.path.basename(d["image"]) for d in detections) == sorted(SIZES)


def test_detection_name_that_still_collides_is_refused_before_writing(infer, det_ckpt, twins, tmp_path):
    cv2.imwrite(str(twins / "x_png.bmp"), np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(OutputPathError, match=r"the inputs imgs/x.png and imgs/x_png.bmp would both be written as "
                                              r"x_png_vis.png"):
        infer(["-c", DET_DEMO_CFG, "-w", det_ckpt, "-i", "imgs", "-o", "out"])
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- video
def test_video_twins_get_their_own_strips(infer, tmp_path, monkeypatch):
    """``x.mp4`` beside ``x.mov``: ``x_mp4_strip.png`` and ``x_mov_strip.png``, each the strip that video alone
    gives (before: ``x_strip.png`` and ``x_1_strip.png``, a counter that ``x_1.mp4`` collided with)."""
    from video.demo_data import render_clip, write_video

    ckpt = random_checkpoint(VIDEO_CFG, VIDEO_SHRINK, tmp_path)
    folder = tmp_path / "videos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, cls in (("x.mp4", 0), ("x.mov", 5)):
        write_video(folder / name, render_clip(rng, cls, size=64, num_frames=16))
    monkeypatch.chdir(tmp_path)
    infer(["-c", VIDEO_CFG, "-w", ckpt, "-i", "videos", "-o", "out", *VIDEO_SHRINK])
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["x_mov_strip.png", "x_mp4_strip.png"]
    for name, strip in (("x.mp4", "x_mp4_strip.png"), ("x.mov", "x_mov_strip.png")):
        infer(["-c", VIDEO_CFG, "-w", ckpt, "-i", f"videos/{name}", "-o", f"alone_{name}", *VIDEO_SHRINK])
        assert [p.name for p in (tmp_path / f"alone_{name}").glob("*.png")] == ["x_strip.png"]  # alone: plain
        np.testing.assert_array_equal(cv2.imread(str(tmp_path / "out" / strip)),
                                      cv2.imread(str(tmp_path / f"alone_{name}" / "x_strip.png")))
    a, b = (cv2.imread(str(tmp_path / "out" / s)) for s in ("x_mp4_strip.png", "x_mov_strip.png"))
    assert a.shape != b.shape or np.abs(a.astype(int) - b.astype(int)).max() > 0  # two videos, two strips


# ----------------------------------------------------------------------------- gan
def test_gan_twins_get_their_own_translations(infer, twins, tmp_path):
    """An image-to-image generator (pix2pix, shrunk, random weights): ``x_png.png`` + ``x_png_pair.png`` and
    ``x_jpg.*``, the pair's left half the input it was made from; each record names its own two files."""
    import copy

    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(GAN_CFG, GAN_SHRINK)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        net = MODELS.build(copy.deepcopy(cfg.model))
    torch.save({"state_dict": net.state_dict(), "meta": {}}, tmp_path / "g.pth")
    cv2.imwrite(str(twins / "x.png"), np.zeros((40, 56, 3), np.uint8))  # black and white: whose input is clear
    cv2.imwrite(str(twins / "x.jpg"), np.full((48, 32, 3), 255, np.uint8))
    infer(["-c", GAN_CFG, "-w", "g.pth", "-i", "imgs", "-o", "out", *GAN_SHRINK])
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.png")) == ["img.png", "img_pair.png", "x_jpg.png", "x_jpg_pair.png",
                                                         "x_png.png", "x_png_pair.png"]
    records = _records(out)
    for name, stem, shade in (("x.png", "x_png", 0), ("x.jpg", "x_jpg", 255)):
        assert records[name]["images"] == [f"{stem}.png", f"{stem}_pair.png"]
        pair = cv2.imread(str(out / f"{stem}_pair.png"))
        assert np.abs(pair[:, : pair.shape[1] // 4].astype(int) - shade).max() <= 2  # its own input on the left
    assert records["img.png"]["images"] == ["img.png", "img_pair.png"]
