"""The detection task's contract object (:class:`oars.tasks.Task`), registered as the ``oars.tasks`` entry point
``detection``: export through :mod:`detection.export`, inference through :mod:`detection.apis`, the
``--draw-threshold`` flag of ``tools/infer.py``, and the ``tools/convert.py`` commands voc2coco, labelme2coco and
torchvision2oars. Everything heavy is imported inside the methods (loading the registry of tasks stays cheap).
"""

from __future__ import annotations

import argparse
import os.path as osp
from typing import TYPE_CHECKING

from oars.tasks import ArgumentContainer, Subcommand, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures

OVERWRITE_HELP = 'replace existing output files (default: stop)'


class DetectionTask(Task):
    """Object detection and instance segmentation (boxes, masks)."""

    scope = "detection"

    def import_registries(self) -> None:
        """Creates the ``detection`` child registries."""
        import detection.registry  # noqa: F401

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """:func:`detection.export.build_export_spec` (YOLOv3 decode + NMS, two-stage R-CNN graphs)."""
        from detection.export import build_export_spec

        return build_export_spec(model, cfg, options)

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """``--no-nms``: ``export.postprocess: false`` (one-stage graphs stop after decoding; the predictor runs the
        NMS, as some runtimes prefer)."""
        parser.add_argument("--no-nms", dest="postprocess", action="store_const", const=False, default=None,
                            help="detection: leave NMS out of the graph (export.postprocess: false; one-stage "
                                 "detectors such as YOLOv3); the predictors then run it")

    def infer_arguments(self, parser: ArgumentContainer) -> None:
        """``--draw-threshold``."""
        parser.add_argument("--draw-threshold", type=float, default=None,
                            help="detection: draw boxes with a score at or above this (default 0.3)")

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`detection.apis.run_inference` (``--draw-threshold`` when given)."""
        from detection.apis import run_inference

        threshold = getattr(args, "draw_threshold", None)
        extra = {} if threshold is None else {"draw_threshold": threshold}
        return run_inference(cfg, weights, inputs, output, device=device, failures=failures, **extra)

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py`` voc2coco, labelme2coco, torchvision2oars."""
        return [
            Subcommand("convert", "voc2coco", "PASCAL VOC (ImageSets list + Annotations/*.xml) -> COCO json",
                       _voc_arguments, _run_voc,
                       usage="python tools/convert.py voc2coco --voc-root data/VOCdevkit/VOC2007 --split "
                             "ImageSets/Main/trainval.txt \\\n"
                             "    --out data/VOCdevkit/VOC2007/annotations/trainval.json [--classes a b ...] "
                             "[--overwrite]",
                       check_outputs=_check_voc_output),
            Subcommand("convert", "labelme2coco", "a folder of labelme *.json files -> COCO json",
                       _labelme_arguments, _run_labelme,
                       usage="python tools/convert.py labelme2coco --input DIR_OF_LABELME_JSON --out ann.json "
                             "[--classes a b ...] \\\n    [--image-root DIR] [--overwrite]",
                       check_outputs=_check_labelme_output),
            Subcommand("convert", "torchvision2oars",
                       "torchvision Faster/Mask R-CNN R50-FPN checkpoint -> oars FasterRCNN/MaskRCNN weights",
                       _torchvision_arguments, _run_torchvision,
                       usage="python tools/convert.py torchvision2oars --input "
                             "fasterrcnn_resnet50_fpn_coco-258fb6c6.pth \\\n    --out work_dirs/faster_rcnn_tv.pth "
                             "[--classes coco80|all|ID ...] \\\n    [-c configs/detection/faster_rcnn/"
                             "faster_rcnn_r50_fpn_torchvision_coco.yaml [-o KEY=VALUE ...]]\n    (a torchvision "
                             "fasterrcnn_resnet50_fpn / maskrcnn_resnet50_fpn state dict -> {'state_dict': ...} "
                             "for\n    tools/eval.py -w; with -c the result is loaded strictly into the config's "
                             "model first)",
                       check_outputs=_check_torchvision_output),
        ]


# ------------------------------------------------------------------------------------------ tools/convert.py
def _coco_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--out', required=True, help='output COCO json (written atomically)')
    parser.add_argument('--classes', nargs='+', default=None,
                        help='class names in category-id order (default: the sorted names found)')
    parser.add_argument('--overwrite', action='store_true', help=OVERWRITE_HELP)


def _voc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--voc-root', required=True, help='folder with JPEGImages/, Annotations/, ImageSets/')
    parser.add_argument('--split', required=True,
                        help='image list relative to --voc-root, e.g. ImageSets/Main/val.txt')
    parser.add_argument('--img-suffix', default='.jpg', help='image file suffix (default .jpg)')
    parser.add_argument('--on-bad-annotation', choices=['fail', 'skip'], default='fail',
                        help="'skip' drops bad boxes/objects with one warning instead of stopping")
    _coco_output_arguments(parser)


def _labelme_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True, help='folder holding the labelme json files')
    parser.add_argument('--image-root', default=None,
                        help='folder that COCO file_name is relative to (default: --input)')
    _coco_output_arguments(parser)


def _torchvision_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True, help="torchvision .pth (a state dict, or {'model': ...})")
    parser.add_argument('--out', required=True, help='output checkpoint ({state_dict, meta})')
    parser.add_argument('--classes', nargs='+', default=['coco80'],
                        help="'coco80' (default: the 80 COCO categories, num_classes 80), 'all' (every output, "
                             "num_classes = outputs - 1, exact scores) or torchvision label indices to keep")
    parser.add_argument('-c', '--config', default=None,
                        help='check: build this config\'s model and load strictly')
    parser.add_argument('-o', '--opt', dest='overrides', nargs='+', action='extend', default=[],
                        metavar='KEY=VALUE', help='config overrides for -c')
    parser.add_argument('--overwrite', action='store_true', help=OVERWRITE_HELP)


def _check_new_file(args: argparse.Namespace, inputs: list[str]) -> None:
    """Before any reading: ``--out`` may not replace an input, nor an existing file without ``--overwrite``."""
    from oars_deploy.output_paths import check_new_file

    check_new_file(args.out, args.overwrite, flag='--out', inputs=tuple(str(p) for p in inputs))


def _check_voc_output(args: argparse.Namespace) -> None:
    _check_new_file(args, [osp.join(args.voc_root, args.split)])


def _check_labelme_output(args: argparse.Namespace) -> None:
    from oars.data.labelme import list_labelme_files

    _check_new_file(args, list_labelme_files(args.input))


def _check_torchvision_output(args: argparse.Namespace) -> None:
    _check_new_file(args, [args.input])


def _run_voc(args: argparse.Namespace) -> None:
    from detection.datasets.converters import summary, voc_to_coco, write_coco_json

    coco = voc_to_coco(args.voc_root, args.split, classes=args.classes, img_suffix=args.img_suffix,
                       on_bad_annotation=args.on_bad_annotation)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out))


def _run_labelme(args: argparse.Namespace) -> None:
    from detection.datasets.converters import labelme_to_coco, summary, write_coco_json

    coco = labelme_to_coco(args.input, classes=args.classes, image_root=args.image_root)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out))


def _run_torchvision(args: argparse.Namespace) -> None:
    from detection.models.convert_torchvision import convert_checkpoint_file

    print(convert_checkpoint_file(args.input, args.out, args.classes, args.config, args.overrides))


TASK = DetectionTask()
