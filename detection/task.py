"""The detection task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``detection``: one kind of model (detectors, with or without masks), exported through :mod:`detection.export`,
predicting through :mod:`detection.apis` (``--draw-threshold`` of ``tools/infer.py``); its commands are in
:mod:`detection.commands`. Everything heavy is imported inside the methods (loading the registry of tasks stays
cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from detection.commands import DetectionCommands
from oars.tasks import ArgumentContainer, Data, Exporter, ModelKind, Predictor, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec


class DetectionData(Data):
    """Browse pictures and ``--out`` records of detectors."""

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> Any:
        """:func:`detection.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from detection.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)

    def result_records(self, sample: Any, dataset_meta: dict) -> list[dict]:
        """:func:`detection.result_records.result_records` (``tools/eval.py --out``)."""
        from detection.result_records import result_records

        return result_records(sample, dataset_meta)

    description_formats = ("coco", "voc", "yolo")

    def dataset_from_description(self, description: Any, split: str) -> dict | None:
        """``--data``: ``coco`` (a split is ``{ann: <json>, img: <image folder>}``) -> ``CocoDataset``; ``voc`` (a
        split is an image-id list such as ``ImageSets/Main/train.txt`` under a VOC root with ``JPEGImages`` and
        ``Annotations``) -> ``VOCDataset``; ``yolo`` (an ultralytics data.yaml, read by the dataset itself) ->
        ``YOLOTxtDataset``. ``classes``: the description's ``names`` (None: those of the annotations)."""
        fmt, names = description.format, description.names
        if fmt == "coco":
            value = description.split(split)
            if not isinstance(value, dict) or "ann" not in value or "img" not in value:
                from oars.config.description_file import DataDescriptionError

                raise DataDescriptionError(f"{description.file}: {split}: format coco expects {{ann: <COCO json>, "
                                           f"img: <image folder>}} (relative to root), got {value!r}")
            return {"type": "CocoDataset", "data_root": description.root,
                    "ann_file": description.resolve(split, value["ann"], "ann"),
                    "data_prefix": {"img": description.resolve(split, value["img"], "img")}, "classes": names}
        if fmt == "voc":
            return {"type": "VOCDataset", "data_root": description.root,
                    "ann_file": description.resolve(split, description.split(split)),
                    "data_prefix": {"img": description.resolve(split, "JPEGImages"),
                                    "ann": description.resolve(split, "Annotations")},
                    "classes": names}  # None: the 20 VOC classes
        if fmt == "yolo":
            for value in description.split(split) if isinstance(description.split(split), list) else [
                    description.split(split)]:
                description.resolve(split, value)  # a missing image folder or list is named now, not when built
            return {"type": "YOLOTxtDataset", "data_yaml": description.path, "split": description.split_name(split),
                    "data_root": "",
                    "classes": names}
        return None


class DetectionExporter(Exporter):
    """Detectors' export (YOLOv3 decode + NMS, two-stage R-CNN graphs) and its evaluation with ``--model-dir``."""

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`detection.export.build_export_spec` (YOLOv3 decode + NMS, two-stage R-CNN graphs)."""
        from detection.export import build_export_spec

        return build_export_spec(model, cfg, options)

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """``--no-nms``: ``export.postprocess: false`` (one-stage graphs stop after decoding; the predictor runs the
        NMS, as some runtimes prefer); ``--raw-heads``: ``export.postprocess: raw`` (the graph ends at the heads'
        maps and the runtime decodes them: what ``--format ncnn`` needs)."""
        parser.add_argument("--no-nms", dest="postprocess", action="store_const", const=False, default=None,
                            help="detection: leave NMS out of the graph (export.postprocess: false; one-stage "
                                 "detectors such as YOLOv3); the predictors then run it")
        parser.add_argument("--raw-heads", dest="postprocess", action="store_const", const="raw", default=None,
                            help="detection: end the graph at the heads' raw maps (export.postprocess: raw; "
                                 "one-stage detectors); the runtime decodes them and runs NMS (--format ncnn)")

    evaluates_exports = True

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        """``pred_instances`` (bboxes, scores, labels[, masks]: original pixels) from the runtime's detection
        result, as the detector's predict mode (``rescale=True``) fills it."""
        import torch
        from mmengine.structures import InstanceData

        inst = InstanceData()
        inst.bboxes = torch.as_tensor(result["bboxes"], dtype=torch.float32).reshape(-1, 4)
        inst.scores = torch.as_tensor(result["scores"], dtype=torch.float32).reshape(-1)
        inst.labels = torch.as_tensor(result["labels"], dtype=torch.int64).reshape(-1)
        if "masks" in result:
            inst.masks = torch.as_tensor(result["masks"], dtype=torch.bool)
        sample.pred_instances = inst


class DetectionPredictor(Predictor):
    """``tools/infer.py``, ``oars.Model.predict`` and image streams for detectors."""

    image_plugin = "detection_boxes"

    def predict(self, model: torch.nn.Module, cfg: Config, inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``detection_boxes`` (``instance_masks`` for mask models): bboxes/scores/labels[/masks] per image, read
        from the samples as ``tools/infer.py`` reads them."""
        from detection.apis.inference import ANNOTATION_LOADERS
        from detection.evaluation.gt_utils import predicted_masks, predictions
        from oars.api.arrays import predict_samples

        results = []
        for sample in predict_samples(model, cfg, inputs, drop=ANNOTATION_LOADERS):
            masks = predicted_masks(sample)
            results.append(predictions(sample) if masks is None else {**predictions(sample), "masks": masks})
        return self.image_plugin, results


class InstanceMaskPredictor(DetectionPredictor):
    """The same for a model with a mask head: its results carry ``masks``, drawn by ``instance_masks``."""

    image_plugin = "instance_masks"


def _has_mask_head(cfg: Any) -> bool:
    """Whether ``cfg``'s model has a mask head (``model.roi_head.mask_head``): an instance segmenter."""
    roi_head = (cfg.get("model") or {}).get("roi_head") or {}
    return bool(roi_head.get("mask_head"))


_EXPORTER, _DATA = DetectionExporter(), DetectionData()


class DetectionTask(Task):
    """Object detection and instance segmentation (boxes, masks)."""

    scope = "detection"
    kinds = (ModelKind("detector", _EXPORTER, DetectionPredictor(), _DATA),
             ModelKind("instance segmenter", _EXPORTER, InstanceMaskPredictor(), _DATA, when=_has_mask_head))
    commands = DetectionCommands()
    metric_aliases = {"box.map": "coco/bbox_mAP", "box.map50": "coco/bbox_mAP_50", "box.map75": "coco/bbox_mAP_75",
                      "seg.map": "coco/segm_mAP", "seg.map50": "coco/segm_mAP_50", "seg.map75": "coco/segm_mAP_75"}

    def import_registries(self) -> None:
        """Creates the ``detection`` child registries."""
        import detection.registry  # noqa: F401


TASK = DetectionTask()
