"""The detection task's commands (:class:`oars.tasks.Commands`): the ``tools/convert.py`` commands voc2coco,
labelme2coco, torchvision2oars, yolo2coco, coco2yolo and cvat2coco, ``tools/optimize_anchors.py``, and the hub
converters of torchvision's COCO detectors. Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

from oars.tasks import Commands, Subcommand

OVERWRITE_HELP = 'replace existing output files (default: stop)'


class DetectionCommands(Commands):
    """What detection adds to the tools."""

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py`` voc2coco, labelme2coco, torchvision2oars, yolo2coco, coco2yolo, cvat2coco, and
        ``tools/optimize_anchors.py``."""
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
                       "torchvision Faster/Mask R-CNN, RetinaNet, FCOS, SSD300 or SSDLite checkpoint -> oars weights",
                       _torchvision_arguments, _run_torchvision,
                       usage="python tools/convert.py torchvision2oars --input "
                             "fasterrcnn_resnet50_fpn_coco-258fb6c6.pth \\\n    --out work_dirs/faster_rcnn_tv.pth "
                             "[--classes coco80|all|ID ...] \\\n    [-c configs/detection/faster_rcnn/"
                             "faster_rcnn_r50_fpn_torchvision_coco.yaml [-o KEY=VALUE ...]]\n    (a torchvision "
                             "fasterrcnn_resnet50_fpn / maskrcnn_resnet50_fpn / retinanet_resnet50_fpn /\n    "
                             "fcos_resnet50_fpn / "
                             "ssd300_vgg16 / ssdlite320_mobilenet_v3_large state dict -> {'state_dict': ...} "
                             "for\n    tools/eval.py -w; with -c the result is loaded strictly into the config's "
                             "model first)",
                       check_outputs=_check_torchvision_output),
            Subcommand("convert", "yolo2coco", "a YOLO txt dataset (ultralytics data YAML) split -> COCO json",
                       _yolo2coco_arguments, _run_yolo2coco,
                       usage="python tools/convert.py yolo2coco --data data/mine/data.yaml [--split train|val|test] "
                             "--out data/mine/val.json [--overwrite]",
                       check_outputs=_check_yolo2coco_output),
            Subcommand("convert", "coco2yolo", "COCO json + images -> YOLO txt labels, image links and a data YAML",
                       _coco2yolo_arguments, _run_coco2yolo,
                       usage="python tools/convert.py coco2yolo --ann data/coco/annotations/instances_val2017.json "
                             "--images data/coco/val2017 \\\n    --out data/coco_yolo [--split val] "
                             "[--copy-images] [--overwrite]",
                       check_outputs=_check_coco2yolo_output),
            Subcommand("convert", "cvat2coco", "a CVAT export (CVAT for images 1.1 XML or COCO 1.0 json) -> COCO json",
                       _cvat_arguments, _run_cvat,
                       usage="python tools/convert.py cvat2coco --input annotations.xml|instances_default.json "
                             "--out ann.json \\\n    [--img-dir IMAGES] [--classes a b ...] [--overwrite]",
                       check_outputs=_check_cvat_output),
            Subcommand("optimize_anchors", "optimize_anchors",
                       "fit anchors to a config's training boxes: YOLO lists (k-means on 1 - IoU, then a genetic "
                       "search), AnchorGenerator ratios and octave scales (RetinaNet, RPN), SSD aspect ratios",
                       _anchor_arguments, _run_optimize_anchors),
        ]

    def hub_converters(self) -> dict[str, str | tuple[str, dict]]:
        """Converters of torchvision's COCO detectors for the hub (``load_from: torchvision://<builder>``,
        oars.hub): to the 80 COCO classes, as the *_torchvision_coco configs (num_classes 80) build them."""
        coco80 = {"classes": "coco80"}
        return {"torchvision_rcnn": ("detection.models.convert_torchvision:rcnn_from_torchvision", coco80),
                "torchvision_dense": ("detection.models.convert_torchvision_onestage:dense_from_torchvision", coco80),
                "torchvision_ssd": ("detection.models.convert_torchvision_onestage:ssd_from_torchvision", coco80)}


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
    from detection.models.convert_checkpoint import convert_checkpoint_file

    print(convert_checkpoint_file(args.input, args.out, args.classes, args.config, args.overrides))


def _yolo2coco_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--data', required=True, help='the ultralytics data YAML (path, train, val, names)')
    parser.add_argument('--split', choices=['train', 'val', 'test'], default='train',
                        help='which split of the YAML to convert (default train)')
    parser.add_argument('--out', required=True, help='output COCO json (written atomically)')
    parser.add_argument('--overwrite', action='store_true', help=OVERWRITE_HELP)


def _check_yolo2coco_output(args: argparse.Namespace) -> None:
    _check_new_file(args, [args.data])


def _run_yolo2coco(args: argparse.Namespace) -> None:
    from detection.datasets.converters import summary, write_coco_json
    from detection.datasets.yolo_converters import yolo_to_coco

    coco, image_root = yolo_to_coco(args.data, args.split)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out) + f'; file_name is relative to {image_root} (data_prefix.img of a CocoDataset)')


def _coco2yolo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--ann', required=True, help='the COCO instances json')
    parser.add_argument('--images', required=True, help="the folder the json's file_name entries are relative to "
                        '(only read: the images are linked, or copied with --copy-images, under OUT/images/SPLIT)')
    parser.add_argument('--out', required=True, help='output folder: labels/SPLIT/*.txt, images/SPLIT/, data.yaml; '
                        'new, empty, or a YOLO dataset of the same classes that lacks SPLIT (the split is added, '
                        'the others kept); an existing SPLIT only with --overwrite')
    parser.add_argument('--split', default='train', choices=['train', 'val', 'test'],
                        help="the split's name in the folders and data.yaml (default train; an existing data.yaml "
                             'with the same class names keeps its other splits; other names are refused)')
    parser.add_argument('--copy-images', action='store_true',
                        help='copy the images instead of making symbolic links')
    parser.add_argument('--overwrite', action='store_true',
                        help='write into a non-empty --out, replacing the files this conversion writes (the split)')


def _check_coco2yolo_output(args: argparse.Namespace) -> None:
    """Before anything is read (and before the dataset code is imported): ``--out`` may not be, hold or lie inside
    ``--images``, may not hold ``--ann``, and unless ``--overwrite`` is missing, empty, or a YOLO dataset
    (``data.yaml``) without ``--split`` yet: a split is added to a dataset as ``--help`` says, never written over.
    The class names are compared once the json is read (``coco_to_yolo``)."""
    from oars_deploy.output_paths import OutputPathError, check_output_folder

    check_output_folder(args.out, args.images, flag='--out', input_flag='--images')
    check_output_folder(args.out, args.ann, flag='--out', input_flag='--ann')
    if args.overwrite or not (osp.isdir(args.out) and os.listdir(args.out)):
        return
    if not osp.isfile(osp.join(args.out, 'data.yaml')):
        raise OutputPathError(f'--out {args.out} is not empty and holds no data.yaml (not a YOLO dataset to add a '
                              'split to); nothing was written (choose an empty or new folder, or pass --overwrite '
                              'to write into it)')
    taken = [f'{kind}/{args.split}' for kind in ('labels', 'images')
             if osp.lexists(osp.join(args.out, kind, args.split))]
    if taken:
        raise OutputPathError(f'--out {args.out} holds the split {args.split!r} already ({", ".join(taken)}); nothing '
                              'was written (pass --overwrite to replace that split, or choose another --split; the '
                              'other splits are kept either way)')


def _run_coco2yolo(args: argparse.Namespace) -> None:
    from detection.datasets.yolo_converters import coco2yolo_summary, coco_to_yolo

    result = coco_to_yolo(args.ann, args.images, args.out, split=args.split, copy_images=args.copy_images)
    print(coco2yolo_summary(result, args.out, args.split))


def _cvat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--input', required=True, help='annotations.xml of a "CVAT for images 1.1" export, or '
                        'annotations/instances_<subset>.json of a "COCO 1.0" export (unzipped)')
    parser.add_argument('--img-dir', default=None, help="folder the images' names are relative to: each image is "
                        'checked to exist with the size the export gives (default: not checked)')
    parser.add_argument('--out', required=True, help='output COCO json (written atomically)')
    parser.add_argument('--classes', nargs='+', default=None,
                        help="labels to keep, in category-id order (default: all of the export's labels, in its "
                             'order)')
    parser.add_argument('--overwrite', action='store_true', help=OVERWRITE_HELP)


def _check_cvat_output(args: argparse.Namespace) -> None:
    _check_new_file(args, [args.input])


def _run_cvat(args: argparse.Namespace) -> None:
    from detection.datasets.converters import summary, write_coco_json
    from detection.datasets.cvat import counts_line, cvat_to_coco

    coco, counts = cvat_to_coco(args.input, img_dir=args.img_dir, classes=args.classes)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out) + (f'\nleft out or changed: {counts_line(counts)}' if counts else ''))


# ------------------------------------------------------------------------------ tools/optimize_anchors.py
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _anchor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--num', type=_positive_int, default=None,
                        help="number of YOLO anchors (default: as many as the config's model.bbox_head.anchors); "
                             "scales x ratios anchors keep the config's counts")
    parser.add_argument('--input-size', type=_positive_int, default=None,
                        help="training input size S: boxes are rescaled as a Resize to (S, S) with the config's "
                             "keep_ratio would (default: the train pipeline's Resize scale)")
    parser.add_argument('--iters', type=_positive_int, default=1000,
                        help='generations of the genetic refinement after k-means (default 1000; YOLO anchors only)')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default 0; same seed, same anchors)')


def _run_optimize_anchors(args: argparse.Namespace) -> None:
    """Fit anchors to the training boxes of ``args.config`` (+ ``-o`` overrides) and print the report."""
    from detection.anchors.report import optimize_config_anchors

    print(optimize_config_anchors(args.config, args.overrides, num=args.num, input_size=args.input_size,
                                  iters=args.iters, seed=args.seed))
