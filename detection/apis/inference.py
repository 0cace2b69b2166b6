"""Run a trained detector over images and write pictures with boxes plus a JSON of detections."""

from __future__ import annotations

import os
import os.path as osp

import cv2
from mmengine.config import Config
from tqdm import tqdm

from detection.evaluation.gt_utils import predictions
from detection.records import detection_record, write_records
from detection.visualization import draw_detection_sample
from oars.inference import batched_predict, build_test_pipeline, init_model, list_images
from oars.visualization import get_palette

ANNOTATION_LOADERS = ("LoadAnnotations",)


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  draw_threshold: float = 0.3) -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (boxes with class names and scores
    at or above ``draw_threshold``) and ``detections.json`` (every kept detection, original pixels, xyxy)."""
    model = init_model(cfg, checkpoint, device)
    classes = list(model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)])
    palette = get_palette(len(classes), model.dataset_meta.get("palette"))
    pipeline = build_test_pipeline(cfg, drop=ANNOTATION_LOADERS)
    paths = list_images(inputs)
    os.makedirs(out_dir, exist_ok=True)
    written, records = [], []
    for path, sample in tqdm(batched_predict(model, pipeline, paths), total=len(paths), desc="infer"):
        stem = osp.splitext(osp.basename(path))[0]
        pred = predictions(sample)
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        out = osp.join(out_dir, f"{stem}_vis.png")
        cv2.imwrite(out, draw_detection_sample(img, pred, classes, palette, draw_threshold))
        written.append(out)
        records.append(detection_record(path, pred, classes))
    write_records(records, osp.join(out_dir, "detections.json"))
    return written
