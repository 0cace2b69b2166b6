"""``semantic_labels``: segmentors (a class per pixel).

Post-processing: :func:`.postprocess.segmentation` (crop the padding, resize to the original size, argmax), with
the array module (CuPy on the GPU). Per image: ``<stem>_vis.png`` (:func:`.draw.draw_sample`, which evaluation and
tools/infer.py draw too), ``<stem>.png`` (class ids as a palette PNG, :func:`oars_deploy.draw.save_label_png`) and a
:class:`.records.SemanticLabelsRecord` naming that PNG
(``<stem>``: :meth:`~oars_deploy.predictors.images.ImagePlugin.output_stems`, e.g. ``a/x`` for ``twins/a/x.png``).
No flags of its own; ``--draw-threshold`` is refused.
"""

from __future__ import annotations

import argparse
import os.path as osp
from typing import Any

import numpy as np

from oars_deploy.draw.label_png import save_label_png
from oars_deploy.errors import DeployError
from oars_deploy.plugins import register_predictor
from oars_deploy.predictors.images import ImagePlugin, image_task
from oars_deploy.predictors.semantic_labels.draw import draw_sample, picture_inputs
from oars_deploy.predictors.semantic_labels.postprocess import segmentation
from oars_deploy.predictors.semantic_labels.records import semantic_labels_result
from oars_deploy.predictors.semantic_labels.views import result_views
from oars_deploy.records import ResultRecord


@register_predictor("semantic_labels")
class SemanticLabels(ImagePlugin):
    """A label map per image (see the module docstring)."""

    describes = "segmentation models"
    array_postprocess = True
    output_names = ("{stem}_vis.png", "{stem}.png")
    result_views = staticmethod(result_views)  # Result.label_map: oars_deploy.result

    def claims(self, deploy: dict) -> bool:
        """An old export of task segmentation."""
        return image_task(deploy) == "segmentation"

    def check_args(self, args: argparse.Namespace, deploy: dict) -> None:
        """``--draw-threshold`` is for detection models."""
        if getattr(args, "draw_threshold", None) is not None:
            raise DeployError(f"--draw-threshold applies to detection models, not to task "
                              f"{deploy['model']['task']!r}")

    def postprocess(self, outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
        """:func:`oars_deploy.predictors.semantic_labels.postprocess.segmentation`."""
        return segmentation(outputs, metas, post)

    def draw(self, img: np.ndarray, result: dict, predictor: Any, args: argparse.Namespace) -> np.ndarray:
        """The label map over ``img`` with the class legend (an image over ``PICTURE_MAX_SIDE`` drawn scaled down:
        :func:`.draw.picture_inputs`)."""
        small_img, small_label = picture_inputs(img, result["label"])
        return draw_sample(small_img, small_label, predictor.palette, class_names=predictor.labels)

    def record(self, out_dir: str, path: str, stem: str, img: np.ndarray, result: dict,
               predictor: Any) -> ResultRecord:
        """The label PNG ``<stem>.png`` (written here) and the record naming it."""
        save_label_png(result["label"], predictor.palette, osp.join(out_dir, f"{stem}.png"))
        return self.result_record(path, stem, img, result, predictor)

    def result_record(self, path: str, stem: str, img: np.ndarray, result: dict, predictor: Any) -> ResultRecord:
        """The record naming the label PNG ``<stem>.png`` (class pixel counts), without writing it."""
        return semantic_labels_result(path, result["label"], predictor.labels, f"{stem}.png")
