"""tools/export.py for video recognizers (shrunk TSM / TSN / R(2+1)D): the graph input layouts, deploy.yaml's
sampling and preprocess sections, the ONNX Runtime vs PyTorch self-check, and the errors for test pipelines that
cannot be deployed."""

from __future__ import annotations

import copy

import pytest
from mmengine.config import Config
from vid_export_cases import CLASSES, CROP, STNET_CLIP_LEN, STNET_SEGMENTS, T, checkpoint, video_config

from oars.export import ExportError, read_deploy_yaml
from oars.pipelines.export import export_model
from video.export import describe_pipeline, export_options

pytestmark = pytest.mark.slow  # each export traces a network and encodes a few short videos (5-20 s)


def _export(tmp_path, name, crop="CenterCrop", num_clips=None, dynamic=False, **export):
    cfg = video_config(str(tmp_path), name, crop, num_clips, **export)
    result = export_model(cfg, checkpoint(cfg), str(tmp_path / "out"), dynamic=dynamic)
    return result, read_deploy_yaml(str(tmp_path / "out" / "deploy.yaml"))


def test_tsm_dynamic_batch(tmp_path):
    result, deploy = _export(tmp_path, "tsm", dynamic=True)
    check = result["check"]
    assert check["preprocess_max_abs_diff"] == 0.0  # the predictor's decoding + preprocessing = the pipeline's
    assert check["outputs"]["scores"]["max_abs_diff"] < 1e-5
    assert check["dynamic_batch"]["batch"] == 3
    assert deploy["input"] == {"name": "clips", "shape": [-1, T, 3, CROP, CROP], "dynamic_axes": {0: "batch"},
                               "dtype": "float32", "layout": "NTCHW", "color": "BGR"}
    assert deploy["sampling"] == {"clip_len": 1, "frame_interval": 1, "num_clips": T, "out_of_bound_opt": "loop",
                                  "twice_sample": False, "min_frames": 2, "decoder": "pyav"}
    assert [s["type"] for s in deploy["preprocess"]] == ["Resize", "CenterCrop", "Normalize", "FormatShape"]
    assert deploy["labels"] == CLASSES
    assert deploy["outputs"][0]["shape"] == [-1, len(CLASSES)]
    assert deploy["postprocess"]["type"] == "classification"


def test_tsn_three_crop_score_averaging(tmp_path):
    result, deploy = _export(tmp_path, "tsn", crop="ThreeCrop", batch=2)
    assert deploy["input"]["shape"] == [2, 3 * T, 3, CROP, CROP]  # 3 crops x T segments, views-major
    assert deploy["postprocess"]["average_clips"] == "score"
    assert result["check"]["outputs"]["scores"]["max_abs_diff"] < 1e-5
    assert result["check"]["preprocess_max_abs_diff"] == 0.0


@pytest.mark.parametrize("num_clips,layout,shape", [(1, "NCTHW", [1, 3, T, CROP, CROP]),
                                                    (2, "NVCTHW", [1, 2, 3, T, CROP, CROP])])
def test_r2plus1d_layouts(tmp_path, num_clips, layout, shape):
    result, deploy = _export(tmp_path, "r2plus1d", num_clips=num_clips)
    assert deploy["input"]["layout"] == layout and deploy["input"]["shape"] == shape
    assert deploy["sampling"]["clip_len"] == T and deploy["sampling"]["frame_interval"] == 2
    assert deploy["preprocess"][-1] == {"type": "FormatShape", "input_format": "NCTHW"}
    assert result["check"]["outputs"]["scores"]["max_abs_diff"] < 1e-5


def test_stnet_three_crop(tmp_path):
    """StNet (clip_len 5 x num_clips 7 super-images) goes through the 2D path: [N, 3 views * 35 frames, 3, H, W]."""
    result, deploy = _export(tmp_path, "stnet", crop="ThreeCrop")
    frames = STNET_CLIP_LEN * STNET_SEGMENTS
    assert deploy["input"]["shape"] == [1, 3 * frames, 3, CROP, CROP] and deploy["input"]["layout"] == "NTCHW"
    assert (deploy["sampling"]["clip_len"], deploy["sampling"]["num_clips"]) == (STNET_CLIP_LEN, STNET_SEGMENTS)
    assert result["check"]["outputs"]["scores"]["max_abs_diff"] < 1e-5
    assert result["check"]["preprocess_max_abs_diff"] == 0.0


# ----------------------------------------------------------------------------- errors (no model built)
def _cfg(tmp_path, name="tsm", edit=None, **export):
    cfg = Config.fromfile(video_config(str(tmp_path), name, **export))
    if edit:
        pipeline = cfg.test_dataloader.dataset.pipeline
        edit(pipeline)
    return cfg


def test_input_shape_must_match_the_pipeline(tmp_path):
    cfg = _cfg(tmp_path, input_shape=[1, 8, 3, CROP, CROP])
    with pytest.raises(ExportError, match=r"set export.input_shape to \[1, 4, 3, 32, 32\]"):
        export_options(cfg)
    assert export_options(_cfg(tmp_path, input_shape=[2, T, 3, CROP, CROP])).input_shape == (2, T, 3, CROP, CROP)


def test_random_sampling_is_refused(tmp_path):
    cfg = _cfg(tmp_path, edit=lambda p: p[1].update(test_mode=False))
    with pytest.raises(ExportError, match="test_mode must be true"):
        describe_pipeline(cfg)


def test_unsupported_step_is_named(tmp_path):
    cfg = _cfg(tmp_path, edit=lambda p: p.insert(4, dict(type="Flip", prob=0.5)))
    with pytest.raises(ExportError, match=r"step 4 \(Flip\) cannot be expressed"):
        describe_pipeline(cfg)


def test_clip_of_the_videos_own_size_is_refused(tmp_path):
    cfg = _cfg(tmp_path, edit=lambda p: p.pop(4))
    with pytest.raises(ExportError, match="fixed \\(H, W\\)"):
        describe_pipeline(cfg)


def test_torchcodec_backend_is_refused(tmp_path):
    cfg = _cfg(tmp_path, edit=lambda p: p[0].update(backend="torchcodec"))
    with pytest.raises(ExportError, match="backend: pyav"):
        describe_pipeline(cfg)


def test_classes_from_a_file(tmp_path):
    """A dataset's classes given as a text file name the labels (not the characters of its path)."""
    from oars.export.labels import _config_dataset_meta

    (tmp_path / "classes.txt").write_text("\n".join(CLASSES) + "\n\n")
    cfg = _cfg(tmp_path)
    ds = copy.deepcopy(cfg.test_dataloader.dataset)
    ds.update(classes="classes.txt", data_root=str(tmp_path))
    cfg.test_dataloader.dataset = ds
    assert _config_dataset_meta(cfg)["classes"] == CLASSES
