"""What ``tools/infer.py`` runs for the extra task: predict every image, write the pictures and results.jsonl
(the runtime plug-in's records, :mod:`extra_task.predictor`)."""

from __future__ import annotations

import os

import cv2
from mmengine.config import Config

from extra_task.datasets import CLASSES
from extra_task.predictor import write_image_class
from oars.inference import batched_predict, build_test_pipeline, check_output_folder, list_images
from oars.pipelines.model import init_model
from oars_deploy.failures import Failures
from oars_deploy.records import write_results


def run_inference(cfg: Config, weights: str, inputs: str, output: str, device: str, failures: Failures) -> list[str]:
    """``output/<stem>_vis.png`` per image and ``output/results.jsonl``; returns the picture paths."""
    check_output_folder(output, inputs)
    model = init_model(cfg, weights, device)
    classes = list(model.dataset_meta.get("classes") or CLASSES)
    pipeline = build_test_pipeline(cfg)
    os.makedirs(output, exist_ok=True)
    written, records = [], []
    for path, sample in batched_predict(model, pipeline, list_images(inputs), batch_size=8, failures=failures):
        out, record = write_image_class(output, path, cv2.imread(path, cv2.IMREAD_COLOR),
                                        sample.pred_score.cpu().numpy(), classes)
        written.append(out)
        records.append(record)
    write_results(records, output)
    return written
