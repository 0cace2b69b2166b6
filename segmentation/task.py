"""The segmentation task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``segmentation``: one kind of model, exported through :mod:`segmentation.export` (argmax in the graph), predicting
through :mod:`segmentation.apis`, with the ``ignore_index`` agreement check of every dataset; its commands are in
:mod:`segmentation.commands`. Everything heavy is imported inside the methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oars.errors import OarsError
from oars.tasks import ArgumentContainer, Data, Exporter, ModelKind, Predictor, Task
from segmentation.commands import SegmentationCommands

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec


class SegmentationData(Data):
    """Dataset checks, browse pictures and ``--out`` records of segmenters."""

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> Any:
        """:func:`segmentation.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from segmentation.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)

    def result_records(self, sample: Any, dataset_meta: dict) -> list[dict]:
        """:func:`segmentation.result_records.result_records` (``tools/eval.py --out``)."""
        from segmentation.result_records import result_records

        return result_records(sample, dataset_meta)

    def check_dataset(self, cfg: Config, split: str, dataset: Any) -> None:
        """The dataset's ``ignore_index`` must be the decode/auxiliary heads', the label padding value
        (``seg_pad_val``) and the IoU metrics': a pixel to ignore carries one value everywhere."""
        ignore = dataset.metainfo.get("ignore_index")
        if ignore is not None:
            check_ignore_index(cfg, f"{split}.dataset.ignore_index", ignore)

    description_formats = ("seg_folders", "voc_seg", "cityscapes")

    def dataset_from_description(self, description: Any, split: str) -> dict | None:
        """``--data``: ``seg_folders`` (a split is ``{img: <image folder>, ann: <label folder>}``; the description's
        ``img_suffix`` / ``seg_map_suffix``, default .jpg / .png) -> ``SegDataset``; ``voc_seg`` (a split is a list
        such as ``ImageSets/Segmentation/train.txt`` under a VOC root) -> ``PascalVOCDataset``; ``cityscapes`` (a
        split is ``train``/``val``/``test``: ``leftImg8bit/<split>`` and ``gtFine/<split>``) -> ``CityscapesDataset``.
        ``classes``: the description's ``names``, background included (None: the dataset's own)."""
        fmt, names, root = description.format, description.names, description.root
        if fmt == "seg_folders":
            value = description.split(split)
            if not isinstance(value, dict) or "img" not in value or "ann" not in value:
                from oars.config.description_file import DataDescriptionError

                raise DataDescriptionError(f"{description.file}: {split}: format seg_folders expects {{img: <image "
                                           f"folder>, ann: <label folder>}} (relative to root), got {value!r}")
            return {"type": "SegDataset", "data_root": root, "img_dir": description.resolve(split, value["img"], "img"),
                    "ann_dir": description.resolve(split, value["ann"], "ann"),
                    "img_suffix": description.raw.get("img_suffix", ".jpg"),
                    "seg_map_suffix": description.raw.get("seg_map_suffix", ".png"), "classes": names}
        if fmt == "voc_seg":
            return {"type": "PascalVOCDataset", "data_root": root,
                    "split": description.resolve(split, description.split(split)),
                    "img_dir": description.resolve(split, "JPEGImages"),
                    "ann_dir": description.resolve(split, "SegmentationClass"), "classes": names}
        if fmt == "cityscapes":
            name = description.split(split)
            return {"type": "CityscapesDataset", "data_root": root,
                    "img_dir": description.resolve(split, f"leftImg8bit/{name}"),
                    "ann_dir": description.resolve(split, f"gtFine/{name}"), "classes": names}
        return None


class SegmentationExporter(Exporter):
    """Segmenters' export and its evaluation with ``--model-dir``."""

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`segmentation.export.build_export_spec`."""
        from segmentation.export import build_export_spec

        return build_export_spec(model, cfg, options)

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """``--output-op``: ``export.output_op`` (what the graph ends with)."""
        from segmentation.export import OUTPUT_OPS

        parser.add_argument("--output-op", choices=list(OUTPUT_OPS), default=None,
                            help="segmentation: the graph's last op (export.output_op): argmax -> a label map "
                                 "(default), softmax -> class probabilities, none -> logits")

    evaluates_exports = True

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        """``pred_sem_seg`` ([1, H, W] int64 class ids, original pixels) from the runtime's label map."""
        import torch
        from mmengine.structures import PixelData

        sample.pred_sem_seg = PixelData(data=torch.as_tensor(result["label"], dtype=torch.int64)[None])


class SegmentationPredictor(Predictor):
    """``tools/infer.py``, ``oars.Model.predict`` and image streams for segmenters."""

    image_plugin = "semantic_labels"  # a label map per frame

    def predict(self, model: torch.nn.Module, cfg: Config, inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``semantic_labels``: ``{'label': int64 [H, W]}`` per image, by ``tools/infer.py``'s predictor."""
        from oars.api.arrays import predict_samples
        from segmentation.apis.inference import ANNOTATION_LOADERS, predict_labels

        samples = predict_samples(model, cfg, inputs, drop=ANNOTATION_LOADERS, predict=predict_labels)
        return self.image_plugin, [{"label": s.pred_sem_seg.data[0].cpu().numpy().astype("int64")} for s in samples]


class SegmentationTask(Task):
    """Semantic segmentation (one class id per pixel)."""

    scope = "segmentation"
    kinds = (ModelKind("segmenter", SegmentationExporter(), SegmentationPredictor(), SegmentationData()),)
    commands = SegmentationCommands()
    metric_aliases = {"seg.miou": "mIoU", "seg.macc": "mAcc", "seg.aacc": "aAcc"}

    def import_registries(self) -> None:
        """Creates the ``segmentation`` child registries."""
        import segmentation.registry  # noqa: F401


def check_ignore_index(cfg: Config, source: str, value: int) -> None:
    """Raise an :class:`OarsError` naming every key of ``cfg`` whose ignore value differs from ``value`` (the
    dataset's, named ``source``): the heads' ``ignore_index``, ``data_preprocessor.seg_pad_val``, the
    ``IoUMetric`` evaluators' ``ignore_index``."""
    model = cfg.get("model", {})
    aux = model.get("auxiliary_head")
    heads = {"model.decode_head": model.get("decode_head")}
    heads.update({f"model.auxiliary_head.{i}": h for i, h in enumerate(aux if isinstance(aux, list) else [aux])})
    users = {f"{k}.ignore_index": h.get("ignore_index", 255) for k, h in heads.items() if isinstance(h, dict)}
    if isinstance(model.get("data_preprocessor"), dict) and "seg_pad_val" in model["data_preprocessor"]:
        users["model.data_preprocessor.seg_pad_val"] = model["data_preprocessor"]["seg_pad_val"]
    for split in ("val_evaluator", "test_evaluator"):
        evaluator = cfg.get(split)
        for i, metric in enumerate(evaluator if isinstance(evaluator, list) else [evaluator]):
            if isinstance(metric, dict) and metric.get("type") == "IoUMetric":
                users[f"{split}{f'.{i}' if isinstance(evaluator, list) else ''}.ignore_index"] = metric.get(
                    "ignore_index", 255)
    wrong = {k: v for k, v in users.items() if v != value}
    if wrong:
        listed = ", ".join(f"{k}={v}" for k, v in wrong.items())
        raise OarsError(f"{cfg.filename}: {source} is {value} but {listed}; pixels to ignore must carry the same "
                        "value everywhere (set them all, e.g. with -o)")


TASK = SegmentationTask()
