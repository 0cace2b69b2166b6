"""tools/browse_dataset.py: what the pipeline feeds the model, drawn per task (augmentations applied), one readable
PNG per sample, never written into the data folder."""

from __future__ import annotations

import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
from demo_utils import DEMO_CFG, MASK_DEMO_CFG, ROOT

from oars.analysis.browse import browse
from oars.errors import OarsError
from oars_deploy.errors import UserError

GAN_CFG = os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_demo_shapes.yaml")
VIDEO_CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")


def _roots(data: str, phases=("train", "val", "test")) -> list[str]:
    return [f"{p}_dataloader.dataset.data_root={data}" for p in phases]


def _read(path) -> np.ndarray:
    img = cv2.imread(str(path))
    assert img is not None, path
    return img


def test_segmentation_browse_from_the_command_line(demo_data, tmp_path):
    """As a user runs it: relative output folder that exists already, -o mixing the folder and overrides."""
    (tmp_path / "pics").mkdir()
    cmd = [sys.executable, os.path.join(ROOT, "tools/browse_dataset.py"), "-c", DEMO_CFG, "-o", "pics",
           "--num", "3", "-o", *_roots(demo_data)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2")))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "wrote 3 pictures to pics" in proc.stdout
    names = sorted(os.listdir(tmp_path / "pics"))
    assert names == ["00000_0000.png", "00001_0001.png", "00002_0002.png"]
    img = _read(tmp_path / "pics" / names[0])
    # image | label | overlay, each enlarged from the 64-px training crop to 512, plus the legend
    assert img.shape[0] >= 512 and img.shape[1] >= 3 * 512
    label_panel = img[-256:, 512 + 4 + 256: 512 + 4 + 258]  # the label panel's middle column, lower half
    assert len(np.unique(label_panel.reshape(-1, 3), axis=0)) <= 4  # flat class colours, not a photo


def test_detection_browse_draws_boxes_and_masks(demo_data, tmp_path):
    out = tmp_path / "det"
    written = browse(MASK_DEMO_CFG, _roots(demo_data), str(out), phase="val", num=2, progress=False)
    assert [os.path.basename(p) for p in written] == ["00000_0000.png", "00001_0001.png"]
    img = _read(written[0])
    assert max(img.shape[:2]) >= 512
    # the class colours of the boxes are on the picture (palette rows, RGB -> BGR)
    from oars_deploy.draw import get_palette

    palette = get_palette(3)[:, ::-1]
    found = [(img.reshape(-1, 3) == c).all(axis=1).sum() for c in palette]
    assert sum(n > 50 for n in found) >= 1


def test_gan_browse_shows_the_pair(demo_data, tmp_path):
    written = browse(GAN_CFG, _roots(demo_data), str(tmp_path / "gan"), num=1, progress=False)
    img = _read(written[0])
    assert img.shape[1] >= 2 * 512 and img.shape[0] >= 512  # img_A | img_B, 64 px enlarged x8


def test_video_browse_draws_a_frame_strip(tmp_path):
    from video.demo_data import generate

    data = tmp_path / "videos"
    generate(data, num_train=1, num_val=1, size=32, num_frames=8)
    written = browse(VIDEO_CFG, _roots(str(data)), str(tmp_path / "vid"), phase="val", num=1, progress=False)
    img = _read(written[0])
    assert img.shape[1] >= 512 and img.shape[0] >= 128


def test_browse_refuses_the_data_folder_and_a_missing_phase(demo_data, tmp_path):
    with pytest.raises(UserError, match="is inside the input folder train_dataloader.dataset.data_root"):
        browse(DEMO_CFG, _roots(demo_data), os.path.join(demo_data, "pics"), num=1, progress=False)
    assert not os.path.exists(os.path.join(demo_data, "pics"))
    with pytest.raises(OarsError, match="--phase"):
        browse(DEMO_CFG, _roots(demo_data), str(tmp_path / "x"), phase="predict", num=1, progress=False)


def test_task_without_pictures_says_so():
    from oars.tasks import Exporter, ModelKind, Predictor, Task

    class _Exporter(Exporter):
        def build_export_spec(self, model, cfg, options):
            raise NotImplementedError

    class _Predictor(Predictor):
        def infer(self, *a, **k):
            raise NotImplementedError

    class _Bare(Task):
        scope = "bare"
        kinds = (ModelKind("bare", _Exporter(), _Predictor()),)

        def import_registries(self):
            return None

    with pytest.raises(OarsError, match="not available for task 'bare'"):
        _Bare().data({}).draw_pipeline_sample({}, {})
    with pytest.raises(OarsError, match="--out is not available for task 'bare'"):
        _Bare().data({}).result_records(None, {})


def test_segmentation_picture_names_label_values_outside_the_classes():
    import torch
    from mmengine.structures import PixelData

    from segmentation.browse import draw_pipeline_sample
    from segmentation.structures import SegDataSample

    sample = SegDataSample(metainfo={"seg_map_path": "labels/x.png"})
    label = torch.zeros((1, 16, 16), dtype=torch.uint8)
    label[0, :4] = 255  # ignored: fine
    sample.gt_sem_seg = PixelData(data=label)
    meta = {"classes": ("bg", "fg"), "ignore_index": 255}
    img = draw_pipeline_sample({"inputs": torch.zeros((3, 16, 16), dtype=torch.uint8), "data_samples": sample}, meta)
    assert img.shape[0] >= 512 and img.dtype == np.uint8
    label[0, 8] = 7  # neither a class nor the ignore index: what makes a loss NaN
    with pytest.raises(ValueError, match=r"labels/x.png: label values \[7\] are neither class ids"):
        draw_pipeline_sample({"inputs": torch.zeros((3, 16, 16), dtype=torch.uint8), "data_samples": sample}, meta)
