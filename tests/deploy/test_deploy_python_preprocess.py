"""oars_deploy pre- and post-processing against the PyTorch paths they reproduce.

Preprocessing: for the demo configs and non-square images, deploy.yaml's steps give the same input as
``model.data_preprocessor(test_pipeline(img))`` (1e-6; the deploy input is further padded to the fixed export
size). Postprocessing: bilinear/nearest resizes vs F.interpolate/cv2, NumPy NMS vs torchvision's, the raw and
argmax result paths vs the models' own predict.
"""

from __future__ import annotations

import copy
import os.path as osp

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.dataset import pseudo_collate
from mmengine.registry import MODELS, DefaultScope

from detection.models.task_utils.postprocess import multiclass_nms as torch_multiclass_nms
from oars.config import load_config
from oars.export.deploy_config import preprocess_steps
from oars.inference import build_test_pipeline
from oars_deploy import postprocess as post
from oars_deploy.arrays import cupy_or_none
from oars_deploy.errors import DeployError
from oars_deploy.nms import multiclass_nms
from oars_deploy.predictors.detection_boxes.postprocess import detection
from oars_deploy.predictors.semantic_labels.postprocess import segmentation
from oars_deploy.preprocess import check_steps, preprocess

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SEG_CFG = osp.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
DET_CFG = osp.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
LOADERS = {"segmentation": ("LoadSegAnnotations",), "detection": ("LoadAnnotations",)}


def _image(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    cv2.circle(img, (w // 3, h // 2), min(h, w) // 4, (20, 200, 90), -1)
    return img


def _torch_inputs(cfg, paths: list[str]) -> tuple[torch.Tensor, list[dict]]:
    """``model.data_preprocessor(test_pipeline(images))['inputs']`` and the samples' metainfo."""
    scope = cfg.default_scope
    pipeline = build_test_pipeline(cfg, drop=LOADERS[scope])
    with DefaultScope.overwrite_default_scope(scope):
        dp = MODELS.build(copy.deepcopy(cfg.model.data_preprocessor))
    out = dp(pseudo_collate([pipeline({"img_path": p}) for p in paths]), training=False)
    return out["inputs"], [s.metainfo for s in out["data_samples"]]


def _write(tmp_path, images: list[np.ndarray]) -> list[str]:
    paths = [str(tmp_path / f"img{i}.png") for i in range(len(images))]
    for path, img in zip(paths, images):
        cv2.imwrite(path, img)
    return paths


@pytest.mark.parametrize("cfg_path", [SEG_CFG, DET_CFG], ids=["unet", "yolov3"])
@pytest.mark.parametrize("hw", [(100, 150), (150, 70)], ids=["landscape", "portrait"])
def test_preprocess_matches_pipeline_and_data_preprocessor(tmp_path, cfg_path, hw):
    cfg = load_config(cfg_path)
    img = _image(*hw, seed=hw[0])
    expected, (meta,) = _torch_inputs(cfg, _write(tmp_path, [img]))
    steps = check_steps(preprocess_steps(cfg))
    batch, metas = preprocess([img], steps)
    _, _, eh, ew = expected.shape
    export_h, export_w = cfg.export.input_shape[2:]
    assert batch.shape == (1, 3, export_h, export_w) and batch.dtype == np.float32
    np.testing.assert_allclose(batch[..., :eh, :ew], expected.numpy(), rtol=0, atol=1e-6)
    pad_value = steps[2]["value"]
    assert np.all(batch[..., eh:, :] == np.float32(pad_value)) and np.all(batch[..., :, ew:] == np.float32(pad_value))
    assert metas[0]["ori_shape"] == tuple(meta["ori_shape"]) == hw
    assert metas[0]["img_shape"] == tuple(meta["img_shape"])
    if "scale_factor" in meta:  # PackDetInputs keeps it, PackSegInputs does not
        np.testing.assert_allclose(metas[0]["scale_factor"], meta["scale_factor"], rtol=0, atol=1e-12)


def test_preprocess_batches_and_rejects_bad_steps():
    steps = [{"type": "Resize", "size": [32, 32], "keep_ratio": True, "interpolation": "linear"},
             {"type": "Normalize", "mean": [0, 0, 0], "std": [255, 255, 255], "to_rgb": True},
             {"type": "Pad", "size": [32, 32], "value": [1.0, 2.0, 3.0]}, {"type": "Permute"}]
    batch, metas = preprocess([_image(40, 80, 0), _image(64, 64, 1)], check_steps(steps))
    assert batch.shape == (2, 3, 32, 32)
    assert metas[0]["img_shape"] == (16, 32) and metas[0]["scale_factor"] == (0.4, 0.4)
    np.testing.assert_array_equal(batch[0, :, 20, 5], [1.0, 2.0, 3.0])  # per-channel pad value
    with pytest.raises(DeployError, match="type must be one of"):
        check_steps([{"type": "Flip"}, {"type": "Permute"}])
    with pytest.raises(DeployError, match="std values must be > 0"):
        check_steps([{**steps[1], "std": [1, 0, 1]}, {"type": "Permute"}])
    with pytest.raises(DeployError, match="last preprocess step must be Permute"):
        check_steps(steps[:3])
    with pytest.raises(DeployError, match="larger than the model input"):
        preprocess([_image(40, 80, 0)], [{"type": "Pad", "size": [32, 32], "value": 0}, {"type": "Permute"}])
    with pytest.raises(DeployError, match="BGR uint8"):
        preprocess([np.zeros((8, 8), np.uint8)], check_steps(steps))


@pytest.mark.gpu
def test_cupy_preprocess_and_postprocess_equal_numpy():
    cp = cupy_or_none()
    if cp is None:
        pytest.skip("cupy is not installed")
    steps = check_steps(preprocess_steps(load_config(SEG_CFG)))
    images = [_image(100, 150, 0), _image(64, 64, 1)]
    ref, ref_metas = preprocess(images, steps)
    got, metas = preprocess(images, steps, xp=cp)
    assert isinstance(got, cp.ndarray) and metas == ref_metas
    np.testing.assert_array_equal(cp.asnumpy(got), ref)
    logits = np.random.default_rng(0).normal(size=(2, 4, 64, 64)).astype(np.float32)
    settings = {"type": "segmentation", "output_op": "none"}
    a = segmentation({"logits": logits}, ref_metas, settings)
    b = segmentation({"logits": cp.asarray(logits)}, ref_metas, settings)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["label"], y["label"])


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("sizes", [((64, 64), (128, 128)), ((40, 64), (100, 160)), ((64, 64), (37, 91))])
def test_resize_bilinear_matches_torch(sizes, align_corners):
    (h, w), out = sizes
    x = np.random.default_rng(h + w).normal(size=(4, h, w)).astype(np.float32)
    ref = F.interpolate(torch.from_numpy(x)[None], size=out, mode="bilinear", align_corners=align_corners)[0].numpy()
    got = post.resize_bilinear(x, out, align_corners)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got.argmax(0), ref.argmax(0))
    labels = x.argmax(0).astype(np.uint8)
    np.testing.assert_array_equal(post.resize_nearest(labels, out),
                                  cv2.resize(labels, out[::-1], interpolation=cv2.INTER_NEAREST))


def test_numpy_nms_matches_torchvision():
    """Also with boxes without area (trials 3, 4: a third of them, many in the same spot, as boxes clipped away at
    an edge are): torchvision keeps every one of those, OpenCV alone would keep one per spot."""
    rng = np.random.default_rng(0)
    for trial in range(5):
        n, c = 600, 3
        xy = rng.uniform(0, 128, (n, 2)).astype(np.float32)
        wh = rng.uniform(4, 50, (n, 2)).astype(np.float32)
        boxes = np.concatenate([xy - wh / 2, xy + wh / 2], 1).clip(0, 128)
        if trial >= 3:
            flat = rng.random(n) < 1 / 3
            boxes[flat, 2] = boxes[flat, 0] = np.where(rng.random(flat.sum()) < 0.5, 128, boxes[flat, 0])
        scores = (rng.uniform(0, 1, (n, c)) ** 3).astype(np.float32)
        got = multiclass_nms(boxes, scores, 0.05, 0.45, max_per_img=40, nms_pre=300 if trial % 2 else None)
        ref = torch_multiclass_nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.05, 0.45, 40,
                                   300 if trial % 2 else None)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b.numpy())
    empty = multiclass_nms(np.zeros((5, 4), np.float32), np.zeros((5, 2), np.float32), 0.1, 0.5)
    assert [e.shape for e in empty] == [(0, 4), (0,), (0,)]


def _shrunk_model(cfg_path: str, overrides: list[str]):
    cfg = load_config(cfg_path, overrides)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        torch.manual_seed(0)
        model = MODELS.build(copy.deepcopy(cfg.model)).eval()
    return cfg, model


def test_detection_raw_postprocess_matches_yolov3_predict(tmp_path):
    """Raw head outputs (decode in the graph) + deploy NMS == YOLOv3's own predict, boxes in original pixels."""
    from detection.export import YOLOv3Decode
    from detection.structures import DetDataSample

    cfg, model = _shrunk_model(DET_CFG, ["model.backbone.base_channels=4"])
    steps = check_steps(preprocess_steps(cfg))
    images = [_image(100, 150, 3), _image(128, 128, 4)]
    batch, metas = preprocess(images, steps)
    inputs, torch_metas = _torch_inputs(cfg, _write(tmp_path, images))
    np.testing.assert_allclose(batch, inputs.numpy(), rtol=0, atol=1e-6)  # same input: 128x128, no padding
    with torch.no_grad():
        boxes, scores = YOLOv3Decode(model)(torch.from_numpy(batch))
        samples = [s.pred_instances for s in model.predict(inputs, [DetDataSample(metainfo=m) for m in torch_metas])]
    test_cfg = model.bbox_head.test_cfg
    settings = {"type": "detection", "inside_graph": ["decode"], "score_thr": test_cfg["score_thr"],
                "conf_thr": test_cfg["conf_thr"], "iou_threshold": test_cfg["nms"]["iou_threshold"],
                "max_per_img": test_cfg["max_per_img"], "nms_pre": test_cfg["nms_pre"]}
    got = detection({"boxes": boxes.numpy(), "scores": scores.numpy()}, metas, settings)
    for res, ref in zip(got, samples):
        assert len(res["labels"]) == len(ref.labels) > 0
        np.testing.assert_allclose(res["bboxes"], ref.bboxes.numpy(), rtol=0, atol=1e-3)
        np.testing.assert_allclose(res["scores"], ref.scores.numpy(), rtol=0, atol=1e-5)
        np.testing.assert_array_equal(res["labels"], ref.labels.numpy())


def test_detection_in_graph_postprocess_rescales_and_clips():
    metas = [{"ori_shape": (100, 200), "img_shape": (128, 128), "scale_factor": (0.64, 1.28)}]
    outputs = {"num_dets": np.array([2]), "boxes": np.array([[[64, 64, 128, 128], [-5, 0, 140, 20], [0, 0, 0, 0]]],
                                                                np.float32),
               "scores": np.array([[0.9, 0.5, 0]], np.float32), "labels": np.array([[1, 0, -1]])}
    res = detection(outputs, metas, {"type": "detection", "inside_graph": ["decode", "nms"]})[0]
    np.testing.assert_allclose(res["bboxes"], [[100, 50, 200, 100], [0, 0, 200, 15.625]], atol=1e-4)
    np.testing.assert_array_equal(res["labels"], [1, 0])
    with pytest.raises(DeployError, match="needs outputs"):
        detection({"boxes": outputs["boxes"]}, metas, {"type": "detection", "inside_graph": ["decode", "nms"]})


def test_segmentation_postprocess_matches_encoder_decoder(tmp_path):
    """Logits path: exactly the segmentor's labels; argmax-in-graph path: equal away from class boundaries."""
    cfg, model = _shrunk_model(SEG_CFG, ["model.backbone.base_channels=4", "model.decode_head.channels=4"])
    steps = check_steps(preprocess_steps(cfg))
    img = _image(128, 128, 5)
    batch, metas = preprocess([img], steps)
    inputs, (meta,) = _torch_inputs(cfg, _write(tmp_path, [img]))
    from segmentation.structures import SegDataSample

    with torch.no_grad():
        logits = model.encode_decode(torch.from_numpy(batch)).numpy()
        ref = model.predict(inputs, [SegDataSample(metainfo=meta)])[0].pred_sem_seg.data[0].numpy()
    exact = segmentation({"logits": logits}, metas, {"type": "segmentation", "output_op": "none"})[0]["label"]
    np.testing.assert_array_equal(exact, ref)
    label = segmentation({"label": logits.argmax(1)}, metas,
                             {"type": "segmentation", "output_op": "argmax"})[0]["label"]
    assert label.shape == ref.shape == (128, 128)
    assert (label != ref).mean() < 0.05
    with pytest.raises(DeployError, match="output_op must be one of"):
        segmentation({"logits": logits}, metas, {"type": "segmentation", "output_op": "sigmoid"})
