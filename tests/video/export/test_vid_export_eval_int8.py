"""tools/eval.py --model-dir for a clip classifier's export, and PTQ INT8 (``--int8 --calib-dir VIDEOS``) for it.

A shrunk demo TSM (ResNet-18 at width 4, 8 segments of 32 px) with random weights on a tiny generated video set:
the FP32 export evaluated through the runtime's video predictor gives the checkpoint's metrics and scores; the
INT8 graph, calibrated on videos read by the predictor's own code, runs in the same evaluation; calibration clips
and a wrong calibration folder are checked on their own.
"""

from __future__ import annotations

import copy
import json
import os.path as osp

import numpy as np
import pytest
import torch

from oars.engine.entry import evaluate
from oars.export import ExportError, read_deploy_yaml
from oars.pipelines.export import export_model

pytestmark = pytest.mark.slow  # two exports (FP32, INT8) and three evaluations of 6 clips (about 25 s)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
CFG = osp.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")


def _overrides(data_root: str) -> list[str]:
    # every split at the generated set: building a runner checks each split's classes against the model
    opts = {"model.backbone.base_channels": 4, "test_dataloader.dataset.data_root": data_root,
            "train_dataloader.dataset.data_root": data_root, "val_dataloader.dataset.data_root": data_root,
            "test_dataloader.num_workers": 0, "test_dataloader.persistent_workers": False,
            "test_dataloader.batch_size": 4, "test_dataloader.dataset.pipeline.3.scale": "[-1,32]",
            "test_dataloader.dataset.pipeline.4.crop_size": 32}
    return [f"{k}={v}" for k, v in opts.items()]


def _random_checkpoint(opts: list[str], classes: list[str], path: str, config: str = CFG) -> str:
    """Random weights with random BN statistics and a wide classifier, so the classes' scores are well apart."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(config, opts)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, 0.0, 0.5)
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, path)
    return path


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    from video.demo_data import generate

    data = tmp_path_factory.mktemp("vid_data")
    info = generate(data, num_train=2, num_val=6, size=48, num_frames=16)
    opts = _overrides(str(data))
    work = tmp_path_factory.mktemp("vid_work")
    ckpt = _random_checkpoint(opts, list(info["classes"]), str(work / "tsm.pth"))
    fp32 = str(work / "fp32")
    export_model(CFG, ckpt, fp32, overrides=opts)
    return {"data": data, "opts": opts, "ckpt": ckpt, "work": work, "fp32": fp32, "classes": list(info["classes"]),
            "deploy": read_deploy_yaml(osp.join(fp32, "deploy.yaml"))}


def _records(path: str) -> dict[str, dict]:
    with open(path) as f:
        records = [json.loads(line) for line in f] if path.endswith(".jsonl") else json.load(f)
    return {r["input"]: r for r in records}


def _evaluate(case, name: str, config: str = CFG, opts: list[str] | None = None, **source) -> tuple[dict, dict]:
    work = case["work"] / name
    out = str(case["work"] / f"{name}_results.json")
    result = evaluate(config, source.pop("checkpoint", None), case["opts"] if opts is None else opts,
                      work_dir=str(work), out=out, **source)
    return result["metrics"], _records(out)


def test_evaluation_needs_only_the_test_data(case, tmp_path):
    """A machine that evaluates need not hold the training data: only the test split is checked and read (the
    training and validation splits point at a folder that does not exist, classes file included)."""
    missing = str(tmp_path / "not_here")
    opts = [o for o in case["opts"] if not o.startswith(("train_dataloader.dataset.data_root",
                                                         "val_dataloader.dataset.data_root"))]
    opts += [f"train_dataloader.dataset.data_root={missing}", f"val_dataloader.dataset.data_root={missing}"]
    metrics, records = _evaluate(case, "test_split_only", opts=opts, checkpoint=case["ckpt"])
    assert set(metrics) == {"acc/top1", "acc/top5", "acc/mean_class_accuracy"} and len(records) == 6


def test_fp32_export_evaluates_as_the_checkpoint(case):
    """Same clips, same evaluator: the runtime predictor's scores are the checkpoint's (to ONNX Runtime's float
    error), so top-1 / top-5 / mean class accuracy are equal; metrics.json names the export."""
    fp32 = case["fp32"]
    torch_metrics, torch_records = _evaluate(case, "torch", checkpoint=case["ckpt"])
    onnx_metrics, onnx_records = _evaluate(case, "onnx_fp32", model_dir=fp32)
    assert set(torch_metrics) == {"acc/top1", "acc/top5", "acc/mean_class_accuracy"}
    assert onnx_metrics == torch_metrics
    assert sorted(onnx_records) == sorted(torch_records) and len(onnx_records) == 6
    for name, ref in torch_records.items():
        got = onnx_records[name]
        assert got["label"] == ref["label"]
        np.testing.assert_allclose(got["scores"], ref["scores"], rtol=0, atol=3e-6)
        assert got["frame_inds"] == ref["frame_inds"]  # the predictor sampled the frames the pipeline did
    assert max(max(r["scores"]) for r in torch_records.values()) > 0.3  # scores well apart, not uniform
    with open(osp.join(str(case["work"] / "onnx_fp32"), "metrics.json")) as f:
        assert json.load(f)["model_dir"] == fp32


def test_feature_classifier_export_evaluates_as_the_checkpoint(case):
    """A frame-feature export (Attention Cluster on the set's per-clip features) goes through the runtime's
    FeaturePredictor: the checkpoint's metrics and labels."""
    config = osp.join(ROOT, "configs/video/attention_cluster/attention_cluster_demo_features.yaml")
    opts = [f"{split}.dataset.data_root={case['data']}" for split in ("train_dataloader", "val_dataloader",
                                                                      "test_dataloader")]
    opts.append("test_dataloader.batch_size=4")
    ckpt = _random_checkpoint(opts, case["classes"], str(case["work"] / "feat.pth"), config)
    export_model(config, ckpt, str(case["work"] / "feat_export"), overrides=opts)
    torch_metrics, torch_records = _evaluate(case, "feat_torch", config, opts, checkpoint=ckpt)
    onnx_metrics, onnx_records = _evaluate(case, "feat_onnx", config, opts, model_dir=str(case["work"] / "feat_export"))
    assert onnx_metrics == torch_metrics and len(onnx_records) == 6
    for name, ref in torch_records.items():
        assert onnx_records[name]["label"] == ref["label"]
        np.testing.assert_allclose(onnx_records[name]["scores"], ref["scores"], rtol=0, atol=3e-6)


def test_ptq_int8_export_calibrates_on_videos_and_evaluates(case, capsys):
    """--int8 --calib-dir VIDEOS: Q/DQ graph, agreement with the FP32 graph printed and recorded, deploy.yaml names
    it, and --model-dir evaluates it on the test clips (the graph exported at batch 1: no batch-2 capture needed)."""
    import onnx

    out = str(case["work"] / "int8")
    calib = str(case["data"] / "videos" / "train")
    result = export_model(CFG, case["ckpt"], out, overrides=[*case["opts"], "export.calib_clips=2"], int8=True,
                          calib_dir=calib, calib_num=1)  # 2 clips of one video
    precision = result["check"]["precision"]
    assert precision["precision"] == "int8" and precision["agreement"]["scores"] >= precision["min_agreement"]
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert deploy["model"]["onnx"] == "model_int8.onnx" and deploy["model"]["precision"] == "int8"
    assert deploy["input"]["shape"][0] == 1
    ops = {n.op_type for n in onnx.load(osp.join(out, "model_int8.onnx")).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    metrics, records = _evaluate(case, "onnx_int8", model_dir=out)
    assert set(metrics) == {"acc/top1", "acc/top5", "acc/mean_class_accuracy"} and len(records) == 6
    assert all(0.0 <= v <= 1.0 for v in metrics.values())


def test_calibration_clips_are_the_predictors_input_shifted(case):
    """The centre calibration clip is the deployed predictor's input exactly; the others move every segment's
    frame inside its segment (hand-computed starts for 30 frames, 8 segments: segment length 3.75)."""
    from oars_deploy.clips.sampling import centred_clip_starts
    from oars_deploy.predictors.clip_classes.predictor import video_input
    from video.export_calibration import VideoCalibrationReader, calibration_clip, shifted_clip_starts

    sampling = {"clip_len": 1, "frame_interval": 1, "num_clips": 8}
    np.testing.assert_array_equal(shifted_clip_starts(30, sampling, 0.5), centred_clip_starts(30, 1, 1, 8))
    np.testing.assert_array_equal(shifted_clip_starts(30, sampling, 1 / 6), [0, 4, 8, 11, 15, 19, 23, 26])
    np.testing.assert_array_equal(shifted_clip_starts(30, {**sampling, "twice_sample": True}, 1 / 6)[8:],
                                  [0, 3, 7, 11, 15, 18, 22, 26])
    assert shifted_clip_starts(0, sampling, 0.9).tolist() == [0] * 8
    deploy = case["deploy"]
    video = str(case["data"] / "videos" / "val" / "00000.mp4")
    centre = calibration_clip(video, deploy["sampling"], deploy["preprocess"], 0.5)
    np.testing.assert_array_equal(centre, video_input(video, deploy["sampling"], deploy["preprocess"])[0])
    reader = VideoCalibrationReader(3)
    items = reader.items([video, "b.mp4"])
    assert items[:3] == [(video, 1 / 6), (video, 0.5), (video, 5 / 6)] and len(items) == 6
    batch = reader.load(items[:3], deploy)
    assert batch.shape == (3, *deploy["input"]["shape"][1:]) and batch.dtype == np.float32
    np.testing.assert_array_equal(batch[1], centre.reshape(batch.shape[1:]))
    assert not np.array_equal(batch[0], batch[1])


def test_wrong_calibration_folder_is_one_message(case, tmp_path):
    """A folder of pictures, a missing folder, a broken video, a bad export.calib_clips: one message each, the
    first three before the model is built."""
    import cv2

    pictures = tmp_path / "pictures"
    pictures.mkdir()
    cv2.imwrite(str(pictures / "a.png"), np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(ExportError, match=r"--calib-dir: no videos .* in folder .*pictures: it holds 1 still image"):
        export_model(CFG, case["ckpt"], str(tmp_path / "o1"), overrides=case["opts"], int8=True,
                     calib_dir=str(pictures))
    with pytest.raises(ExportError, match="--calib-dir .*missing: not a folder .*calibration videos"):
        export_model(CFG, case["ckpt"], str(tmp_path / "o2"), overrides=case["opts"], int8=True,
                     calib_dir=str(tmp_path / "missing"))
    with pytest.raises(ExportError, match="export.calib_clips must be a positive int"):
        export_model(CFG, case["ckpt"], str(tmp_path / "o3"), overrides=[*case["opts"], "export.calib_clips=0"],
                     int8=True, calib_dir=str(pictures))
    from video.export_calibration import VideoCalibrationReader

    (tmp_path / "broken.mp4").write_bytes(b"not a video" * 10)
    with pytest.raises(ExportError, match=r"--calib-dir: .*broken.mp4"):
        VideoCalibrationReader(1).load([(str(tmp_path / "broken.mp4"), 0.5)], case["deploy"])


def test_eval_of_a_localiser_export_is_refused_naming_it(monkeypatch, tmp_path):
    """--model-dir with a temporal localiser's export (segments, not class scores): one message naming its kind."""
    import oars_deploy.deploy_config
    from video.export import export_predictor

    monkeypatch.setattr(oars_deploy.deploy_config, "read_deploy_yaml", lambda path: {"predictor": "video_segments"})
    with pytest.raises(ExportError, match=r"--model-dir .*: a video_segments export .*evaluates the video task's "
                                          r"clip and feature classifiers"):
        export_predictor(str(tmp_path))
