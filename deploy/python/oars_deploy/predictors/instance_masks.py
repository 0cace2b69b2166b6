"""``instance_masks``: detectors that also output a mask per box (Mask R-CNN: deploy.yaml ``postprocess.masks``).

The box plug-in's run (:mod:`oars_deploy.predictors.detection_boxes`): the masks are pasted over their boxes in
original pixels by the post-processing, filled in the pictures and stored as uncompressed COCO RLEs in
detections.json and in each :class:`~oars_deploy.predictors.detection_boxes.records.InstanceMasksRecord`. Flag:
``--draw-threshold``. Its post-processing, records and pictures are the box plug-in's package's (they handle the
masks when a result has them), so this module is the plug-in alone.
"""

from __future__ import annotations

from oars_deploy.plugins import register_predictor
from oars_deploy.predictors.detection_boxes import DetectionBoxes, has_masks
from oars_deploy.predictors.images import image_task


@register_predictor("instance_masks")
class InstanceMasks(DetectionBoxes):
    """Boxes with instance masks (see the module docstring)."""

    describes = "instance segmentation models"

    def claims(self, deploy: dict) -> bool:
        """An old export of task detection with a masks output."""
        return image_task(deploy) == "detection" and has_masks(deploy)
