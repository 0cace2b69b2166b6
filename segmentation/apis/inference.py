"""Run a trained segmentor over images and write colour overlays and raw label PNGs.

Memory: the logits stay at the model's resized size; :func:`segmentation.apis.labels.upsample_argmax` makes the
original-size labels one class plane at a time (the same labels as ``model.predict``), and the picture of a large
image is drawn at most ``PICTURE_MAX_SIDE`` pixels on its long side (the label PNG keeps the full size). An
8000x8000 image no longer needs C x H x W float logits, an int64 label map and three full-size panels at once.
"""

from __future__ import annotations

import os
import os.path as osp

import cv2
import numpy as np
from mmengine.config import Config
from mmengine.structures import PixelData
from tqdm import tqdm

from oars.inference import batched_predict, build_test_pipeline, check_output_folder, list_images
from oars.pipelines.model import init_model
from oars_deploy.draw import get_palette, save_label_png
from oars_deploy.failures import Failures
from oars_deploy.output_paths import output_stems
from oars_deploy.predictors.semantic_labels import SemanticLabels
from oars_deploy.predictors.semantic_labels.draw import draw_sample
from oars_deploy.predictors.semantic_labels.records import semantic_labels_result
from oars_deploy.records import write_results
from segmentation.apis.labels import upsample_argmax

ANNOTATION_LOADERS = ("LoadSegAnnotations",)
PICTURE_MAX_SIDE = 2048  # long side of each panel of <stem>_vis.png; larger images are drawn scaled down


def predict_labels(model, batch: dict) -> list:
    """``model.test_step`` with the logits kept at the resized image size (``img_shape``), then each sample's
    ``pred_sem_seg`` made at its original size by :func:`upsample_argmax` (``seg_logits`` stays small)."""
    original = [s.ori_shape for s in batch["data_samples"]]
    for sample in batch["data_samples"]:
        sample.set_metainfo({"ori_shape": sample.img_shape})
    samples = model.test_step(batch)
    for sample, shape in zip(samples, original):
        sample.set_metainfo({"ori_shape": shape})
        label = upsample_argmax(sample.seg_logits.data, shape[:2], getattr(model, "align_corners", False))
        sample.pred_sem_seg = PixelData(data=label[None])
    return samples


def picture_inputs(img: np.ndarray, label: np.ndarray, max_side: int = PICTURE_MAX_SIDE) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """The image (area) and labels (nearest) scaled so that the long side is at most ``max_side``."""
    h, w = label.shape[:2]
    factor = max_side / max(h, w)
    if factor >= 1:
        return img, label
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    return (cv2.resize(img, size, interpolation=cv2.INTER_AREA),
            cv2.resize(label, size, interpolation=cv2.INTER_NEAREST))


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  failures: Failures | None = None) -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (image | prediction | overlay,
    with a legend), ``<stem>.png`` (class ids) and ``results.jsonl`` (one
    :class:`oars_deploy.predictors.semantic_labels.records.SemanticLabelsRecord` per image, as oars-infer writes it);
    returns the picture paths.

    ``<stem>`` is the name oars-infer gives the same file (:func:`oars_deploy.output_paths.output_stems` with the
    deployed predictor's own file names): the file's stem, or ``x_png`` / ``x_jpg`` for ``x.png`` beside ``x.jpg``
    (one label map would otherwise replace the other); a name that still collides is refused before the model is
    loaded (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).

    An image that cannot be read is skipped and recorded in ``failures``; without ``failures`` their summary is
    raised (:class:`oars_deploy.failures.FolderFailuresError`) after everything readable was written.
    """
    check_output_folder(out_dir, inputs)
    own = failures is None
    failures = Failures() if own else failures
    paths = list_images(inputs)
    stems = output_stems(paths, SemanticLabels.output_names)  # a name collision is told before the model loads
    model = init_model(cfg, checkpoint, device)
    classes = model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)]
    palette = get_palette(len(classes), model.dataset_meta.get("palette"))
    pipeline = build_test_pipeline(cfg, drop=ANNOTATION_LOADERS)
    os.makedirs(out_dir, exist_ok=True)
    written, records = [], []
    for path, sample in tqdm(batched_predict(model, pipeline, paths, failures=failures, predict=predict_labels),
                             total=len(paths), desc="infer"):
        stem = stems[path]
        label = sample.pred_sem_seg.data[0].cpu().numpy()
        del sample
        save_label_png(label, palette, osp.join(out_dir, f"{stem}.png"))
        records.append(semantic_labels_result(path, label, classes, f"{stem}.png"))
        img, small = picture_inputs(cv2.imread(path, cv2.IMREAD_COLOR), label)
        del label
        out = osp.join(out_dir, f"{stem}_vis.png")
        cv2.imwrite(out, draw_sample(img, small, palette, class_names=list(classes)))
        written.append(out)
    write_results(records, out_dir)
    if own:
        failures.raise_if_any(total=len(paths))
    return written
