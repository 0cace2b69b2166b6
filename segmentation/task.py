"""The segmentation task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``segmentation``: export through :mod:`segmentation.export` (argmax in the graph), inference through
:mod:`segmentation.apis`, the ``ignore_index`` agreement check of every dataset, the ``tools/convert.py``
commands labelme2seg and cityscapes2seg and the ``tools/class_weights.py`` command. Everything heavy is imported
inside the methods.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from oars.errors import OarsError
from oars.hub.converters import register_converter
from oars.tasks import ArgumentContainer, Subcommand, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures

SPLITS = ("train", "val", "test")


class SegmentationTask(Task):
    """Semantic segmentation (one class id per pixel)."""

    scope = "segmentation"

    def import_registries(self) -> None:
        """Creates the ``segmentation`` child registries."""
        import segmentation.registry  # noqa: F401

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> Any:
        """:func:`segmentation.browse.draw_pipeline_sample` (``tools/browse_dataset.py``)."""
        from segmentation.browse import draw_pipeline_sample

        return draw_pipeline_sample(sample, dataset_meta)

    def result_records(self, sample: Any, dataset_meta: dict) -> list[dict]:
        """:func:`segmentation.result_records.result_records` (``tools/eval.py --out``)."""
        from segmentation.result_records import result_records

        return result_records(sample, dataset_meta)

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

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`segmentation.apis.run_inference`."""
        from segmentation.apis import run_inference

        return run_inference(cfg, weights, inputs, output, device=device, failures=failures)

    def image_plugin_name(self, cfg: Config) -> str | None:
        """``semantic_labels``: a label map per frame."""
        return "semantic_labels"

    def predict_inputs(self, model: torch.nn.Module, cfg: Config,
                       inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``semantic_labels``: ``{'label': int64 [H, W]}`` per image, by ``tools/infer.py``'s predictor."""
        from oars.api.arrays import predict_samples
        from segmentation.apis.inference import ANNOTATION_LOADERS, predict_labels

        samples = predict_samples(model, cfg, inputs, drop=ANNOTATION_LOADERS, predict=predict_labels)
        return "semantic_labels", [{"label": s.pred_sem_seg.data[0].cpu().numpy().astype("int64")} for s in samples]

    def check_dataset(self, cfg: Config, split: str, dataset: Any) -> None:
        """The dataset's ``ignore_index`` must be the decode/auxiliary heads', the label padding value
        (``seg_pad_val``) and the IoU metrics': a pixel to ignore carries one value everywhere."""
        ignore = dataset.metainfo.get("ignore_index")
        if ignore is not None:
            check_ignore_index(cfg, f"{split}.dataset.ignore_index", ignore)

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py`` labelme2seg and cityscapes2seg, and ``tools/class_weights.py``."""
        return [
            Subcommand("convert", "labelme2seg", "a folder of labelme *.json files -> label-map PNGs (class ids)",
                       _labelme2seg_arguments, _run_labelme2seg,
                       usage="python tools/convert.py labelme2seg --input DIR_OF_LABELME_JSON --out LABEL_DIR "
                             "[--classes a b ...] \\\n    [--overwrite]\n    (one class-id palette PNG per json, "
                             "0 = background, and LABEL_DIR/class_names.txt; see\n    "
                             "segmentation/datasets/labelme.py)",
                       check_outputs=_check_labelme2seg_output),
            Subcommand("convert", "cityscapes2seg", "Cityscapes *_polygons.json -> *_labelTrainIds.png (19 train ids)",
                       _cityscapes2seg_arguments, _run_cityscapes2seg,
                       usage="python tools/convert.py cityscapes2seg --input data/cityscapes/gtFine "
                             "--out data/cityscapes/gtFine [--overwrite]\n    (what cityscapesScripts' "
                             "createTrainIdLabelImgs writes, at the same relative paths; see\n    "
                             "segmentation/datasets/cityscapes_polygons.py)",
                       check_outputs=_check_cityscapes2seg_output),
            Subcommand("class_weights", "class_weights",
                       "median-frequency class weights from a config's training label maps",
                       _class_weights_arguments, _run_class_weights),
        ]


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


# ------------------------------------------------------------------------------------------ tools/convert.py
def _labelme2seg_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True, help='folder holding the labelme json files')
    parser.add_argument('--out', required=True, help='folder for <json stem>.png label maps and class_names.txt')
    parser.add_argument('--classes', nargs='+', default=None,
                        help='class names for ids 1..K (0 is background; a first name "_background_" names it, '
                             '"__ignore__" paints 255, so labelme\'s labels.txt can be passed as it is; '
                             'default: the sorted names found)')
    parser.add_argument('--overwrite', action='store_true', help='replace existing output files (default: stop)')


def _check_labelme2seg_output(args: argparse.Namespace) -> None:
    """A folder of label maps may not be, hold or lie inside the input; per-file existence is checked by
    ``labelme_to_seg`` (it knows the file names only after reading the json files)."""
    from oars_deploy.output_paths import check_output_folder

    check_output_folder(args.out, args.input, flag='--out', input_flag='--input')


def _run_labelme2seg(args: argparse.Namespace) -> None:
    from segmentation.datasets.labelme import labelme_to_seg, summary

    print(summary(labelme_to_seg(args.input, args.out, classes=args.classes, overwrite=args.overwrite)))


def _cityscapes2seg_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True,
                        help='folder searched (all depths) for *_gt*_polygons.json, e.g. data/cityscapes/gtFine')
    parser.add_argument('--out', required=True,
                        help='folder for the *_labelTrainIds.png maps at the same relative paths; may be --input '
                             'itself (beside the json files, where CityscapesDataset looks by default)')
    parser.add_argument('--overwrite', action='store_true', help='replace existing label maps (default: stop)')


def _check_cityscapes2seg_output(args: argparse.Namespace) -> None:
    """``--out`` may be ``--input`` itself (the maps' names end in ``_labelTrainIds.png``, never an input's
    ``_polygons.json``) but not a folder inside it or above it (the two layouts would mix)."""
    import os.path as osp

    from oars_deploy.output_paths import check_output_folder

    same = osp.isdir(args.input) and osp.realpath(args.out) == osp.realpath(args.input)
    check_output_folder(args.out, None if same else args.input, flag='--out', input_flag='--input')


def _run_cityscapes2seg(args: argparse.Namespace) -> None:
    from segmentation.datasets.cityscapes_polygons import cityscapes_to_train_ids, summary

    print(summary(cityscapes_to_train_ids(args.input, args.out, overwrite=args.overwrite)))


# ------------------------------------------------------------------------------------- tools/class_weights.py
def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _class_weights_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=SPLITS, default="train",
                        help="whose dataloader's label maps to count (default: train, what the weights train)")
    parser.add_argument("--ignore-index", type=int, default=None,
                        help="label value that is not a class (default: the dataset's ignore_index, usually 255)")
    parser.add_argument("--num-workers", type=_non_negative, default=0,
                        help="DataLoader workers reading the label maps (default 0: this process)")


def _run_class_weights(args: argparse.Namespace) -> None:
    """Count the label maps of ``args.split`` (``args.config`` + ``args.overrides``, from the tool's base parser)
    and print the YAML to paste as ``model.decode_head.loss_decode.class_weight``."""
    import sys
    import warnings

    from oars.config import load_config
    from segmentation.datasets.class_frequency import (
        UnseenClassWarning,
        class_frequency,
        format_weights,
        label_sources,
    )

    cfg = load_config(args.config, args.overrides)
    sources = label_sources(cfg, args.split, args.ignore_index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnseenClassWarning)
        result = class_frequency(sources, num_workers=args.num_workers)
    for warning in caught:  # one plain line each, not Python's "file:line: Warning" form
        if issubclass(warning.category, UnseenClassWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    print(format_weights(result, args.split, cfg.get("model")))


TASK = SegmentationTask()

# Converters of torchvision's segmentation models for the hub (``load_from: torchvision://<builder>``, oars.hub).
register_converter("torchvision_deeplabv3", "segmentation.models.converters:convert_torchvision_deeplabv3")
register_converter("torchvision_fcn", "segmentation.models.converters:convert_torchvision_fcn")
