"""Run a trained segmentor over images and write colour overlays and raw label PNGs."""

from __future__ import annotations

import os
import os.path as osp

import cv2
from mmengine.config import Config
from tqdm import tqdm

from oars.inference import batched_predict, build_test_pipeline, init_model, list_images
from oars.visualization import get_palette, save_label_png
from segmentation.visualization import draw_sample

ANNOTATION_LOADERS = ("LoadSegAnnotations",)


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu") -> list[str]:
    """Predict every image under ``inputs``; writes ``<stem>_vis.png`` (image | prediction | overlay,
    with a legend) and ``<stem>.png`` (class ids); returns the picture paths."""
    model = init_model(cfg, checkpoint, device)
    classes = model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)]
    palette = get_palette(len(classes), model.dataset_meta.get("palette"))
    pipeline = build_test_pipeline(cfg, drop=ANNOTATION_LOADERS)
    paths = list_images(inputs)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for path, sample in tqdm(batched_predict(model, pipeline, paths), total=len(paths), desc="infer"):
        stem = osp.splitext(osp.basename(path))[0]
        label = sample.pred_sem_seg.data[0].cpu().numpy()
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        out = osp.join(out_dir, f"{stem}_vis.png")
        cv2.imwrite(out, draw_sample(img, label, palette, class_names=list(classes)))
        save_label_png(label, palette, osp.join(out_dir, f"{stem}.png"))
        written.append(out)
    return written
