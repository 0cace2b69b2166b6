"""The segmentation task's commands (:class:`oars.tasks.Commands`): the ``tools/convert.py`` commands labelme2seg
and cityscapes2seg, the ``tools/demo_data.py figures`` set, the ``tools/class_weights.py`` command, and the hub
converters of torchvision's DeepLabV3 and FCN.
Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse

from oars.tasks import Commands, Subcommand

SPLITS = ("train", "val", "test")


class SegmentationCommands(Commands):
    """What segmentation adds to the tools."""

    def subcommands(self) -> list[Subcommand]:
        """``tools/convert.py`` labelme2seg and cityscapes2seg, ``tools/demo_data.py figures`` and
        ``tools/class_weights.py``."""
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
            Subcommand("demo_data", "figures", "stick figures for human parsing whose left/right limbs differ only by "
                       "pose (python -m segmentation.demo_figures)", _figures_arguments, _run_figures,
                       usage="tools/demo_data.py figures --out data/demo_figures"),
            Subcommand("class_weights", "class_weights",
                       "median-frequency class weights from a config's training label maps",
                       _class_weights_arguments, _run_class_weights),
        ]

    def hub_converters(self) -> dict[str, str | tuple[str, dict]]:
        """Converters of torchvision's DeepLabV3 and FCN for the hub (``load_from: torchvision://<builder>``)."""
        return {"torchvision_deeplabv3": "segmentation.models.converters:convert_torchvision_deeplabv3",
                "torchvision_fcn": "segmentation.models.converters:convert_torchvision_fcn"}


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


# ------------------------------------------------------------------------------------- tools/demo_data.py
def _figures_arguments(parser: argparse.ArgumentParser) -> None:
    from segmentation.demo_figures import add_arguments

    add_arguments(parser)


def _run_figures(args: argparse.Namespace) -> int:
    from segmentation.demo_figures import run

    return run(args)


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
