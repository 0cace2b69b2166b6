"""Run a trained detector over images and write pictures with boxes (and instance masks) plus a JSON of detections."""

from __future__ import annotations

import os
import os.path as osp

import cv2
from mmengine.config import Config
from tqdm import tqdm

from detection.evaluation.gt_utils import predicted_masks, predictions
from oars.inference import batched_predict, build_test_pipeline, check_output_folder, list_images
from oars.pipelines.model import init_model
from oars_deploy.draw import get_palette
from oars_deploy.failures import Failures
from oars_deploy.output_paths import output_stems
from oars_deploy.predictors.detection_boxes import DetectionBoxes
from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample
from oars_deploy.predictors.detection_boxes.records import detection_result, detections_json
from oars_deploy.records import write_records, write_results

ANNOTATION_LOADERS = ("LoadAnnotations",)


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  draw_threshold: float = 0.3, failures: Failures | None = None) -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (boxes with class names and scores
    at or above ``draw_threshold``, instance masks filled in the class colour for mask models) and
    ``detections.json`` (every kept detection, original pixels, xyxy; masks as RLE) and ``results.jsonl`` (one
    :class:`oars_deploy.predictors.detection_boxes.records.DetectionBoxesRecord` / ``InstanceMasksRecord`` per image,
    as oars-infer writes it).

    ``<stem>`` is the name oars-infer gives the same file (:func:`oars_deploy.output_paths.output_stems` with the
    deployed predictor's own file names): the file's stem, or ``x_png`` / ``x_jpg`` for ``x.png`` beside ``x.jpg``
    (one picture would otherwise replace the other); a name that still collides is refused before the model is
    loaded (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised (:class:`oars_deploy.failures.FolderFailuresError`) after everything readable was written.
    """
    check_output_folder(out_dir, inputs)
    own = failures is None
    failures = Failures() if own else failures
    paths = list_images(inputs)
    stems = output_stems(paths, DetectionBoxes.output_names)  # a name collision is told before the model loads
    model = init_model(cfg, checkpoint, device)
    classes = list(model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)])
    palette = get_palette(len(classes), model.dataset_meta.get("palette"))
    pipeline = build_test_pipeline(cfg, drop=ANNOTATION_LOADERS)
    os.makedirs(out_dir, exist_ok=True)
    written, results = [], []
    for path, sample in tqdm(batched_predict(model, pipeline, paths, failures=failures), total=len(paths),
                             desc="infer"):
        pred = predictions(sample)
        masks = predicted_masks(sample)
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        out = osp.join(out_dir, f"{stems[path]}_vis.png")
        drawn = pred if masks is None else {**pred, "masks": masks}
        cv2.imwrite(out, draw_detection_sample(img, drawn, classes, palette, draw_threshold))
        written.append(out)
        results.append(detection_result(path, drawn, classes, img.shape[:2]))
    write_records(detections_json(results), osp.join(out_dir, "detections.json"))
    write_results(results, out_dir)
    if own:
        failures.raise_if_any(total=len(paths))
    return written
