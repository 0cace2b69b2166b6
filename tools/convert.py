"""Convert annotations to COCO instances json or to segmentation label maps, or torchvision detection checkpoints
to oars ones.

  python tools/convert.py voc2coco --voc-root data/VOCdevkit/VOC2007 --split ImageSets/Main/trainval.txt \\
      --out data/VOCdevkit/VOC2007/annotations/trainval.json [--classes a b ...] [--overwrite]
  python tools/convert.py labelme2coco --input DIR_OF_LABELME_JSON --out ann.json [--classes a b ...] \\
      [--image-root DIR] [--overwrite]
  python tools/convert.py labelme2seg --input DIR_OF_LABELME_JSON --out LABEL_DIR [--classes a b ...] \\
      [--overwrite]
      (one class-id palette PNG per json, 0 = background, and LABEL_DIR/class_names.txt; see
      segmentation/datasets/labelme.py)
  python tools/convert.py torchvision2oars --input fasterrcnn_resnet50_fpn_coco-258fb6c6.pth \\
      --out work_dirs/faster_rcnn_tv.pth [--classes coco80|all|ID ...] \\
      [-c configs/detection/faster_rcnn/faster_rcnn_r50_fpn_torchvision_coco.yaml [-o KEY=VALUE ...]]
      (a torchvision fasterrcnn_resnet50_fpn / maskrcnn_resnet50_fpn state dict -> {'state_dict': ...} for
      tools/eval.py -w; with -c the result is loaded strictly into the config's model first)

Every converter refuses to replace an existing output without --overwrite and never writes over its input
(oars_deploy.output_paths: the rule every tool that writes files follows).
"""

import argparse
import os.path as osp

from oars.cli import run_cli
from oars_deploy.output_paths import check_new_file, check_output_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    voc = sub.add_parser('voc2coco', help='PASCAL VOC (ImageSets list + Annotations/*.xml) -> COCO json')
    voc.add_argument('--voc-root', required=True, help='folder with JPEGImages/, Annotations/, ImageSets/')
    voc.add_argument('--split', required=True, help='image list relative to --voc-root, e.g. ImageSets/Main/val.txt')
    voc.add_argument('--img-suffix', default='.jpg', help='image file suffix (default .jpg)')
    voc.add_argument('--on-bad-annotation', choices=['fail', 'skip'], default='fail',
                     help="'skip' drops bad boxes/objects with one warning instead of stopping")
    lm = sub.add_parser('labelme2coco', help='a folder of labelme *.json files -> COCO json')
    lm.add_argument('--input', required=True, help='folder holding the labelme json files')
    lm.add_argument('--image-root', default=None,
                    help='folder that COCO file_name is relative to (default: --input)')
    for p in (voc, lm):
        p.add_argument('--out', required=True, help='output COCO json (written atomically)')
        p.add_argument('--classes', nargs='+', default=None,
                       help='class names in category-id order (default: the sorted names found)')
    seg = sub.add_parser('labelme2seg', help='a folder of labelme *.json files -> label-map PNGs (class ids)')
    seg.add_argument('--input', required=True, help='folder holding the labelme json files')
    seg.add_argument('--out', required=True, help='folder for <json stem>.png label maps and class_names.txt')
    seg.add_argument('--classes', nargs='+', default=None,
                     help='class names for ids 1..K (0 is background; a first name "_background_" names it, '
                          '"__ignore__" paints 255, so labelme\'s labels.txt can be passed as it is; '
                          'default: the sorted names found)')
    tv = sub.add_parser('torchvision2oars',
                        help='torchvision Faster/Mask R-CNN R50-FPN checkpoint -> oars FasterRCNN/MaskRCNN weights')
    tv.add_argument('--input', required=True, help="torchvision .pth (a state dict, or {'model': ...})")
    tv.add_argument('--out', required=True, help='output checkpoint ({state_dict, meta})')
    tv.add_argument('--classes', nargs='+', default=['coco80'],
                    help="'coco80' (default: the 80 COCO categories, num_classes 80), 'all' (every output, "
                         "num_classes = outputs - 1, exact scores) or torchvision label indices to keep")
    tv.add_argument('-c', '--config', default=None, help='check: build this config\'s model and load strictly')
    tv.add_argument('-o', '--opt', dest='overrides', nargs='+', action='extend', default=[], metavar='KEY=VALUE',
                    help='config overrides for -c')
    for p in (voc, lm, seg, tv):
        p.add_argument('--overwrite', action='store_true', help='replace existing output files (default: stop)')
    args = parser.parse_args()
    check_outputs(args)
    if args.command == 'torchvision2oars':
        from detection.models.convert_torchvision import convert_checkpoint_file

        print(convert_checkpoint_file(args.input, args.out, args.classes, args.config, args.overrides))
        return
    if args.command == 'labelme2seg':
        from segmentation.datasets.labelme import labelme_to_seg
        from segmentation.datasets.labelme import summary as seg_summary

        print(seg_summary(labelme_to_seg(args.input, args.out, classes=args.classes, overwrite=args.overwrite)))
        return
    from detection.datasets.converters import labelme_to_coco, summary, voc_to_coco, write_coco_json

    if args.command == 'voc2coco':
        coco = voc_to_coco(args.voc_root, args.split, classes=args.classes, img_suffix=args.img_suffix,
                           on_bad_annotation=args.on_bad_annotation)
    else:
        coco = labelme_to_coco(args.input, classes=args.classes, image_root=args.image_root)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out))


def check_outputs(args: argparse.Namespace) -> None:
    """Before any reading: the output may not replace an input, nor an existing file without --overwrite."""
    if args.command == 'labelme2seg':  # a folder of label maps: per-file existence is checked by labelme_to_seg
        check_output_folder(args.out, args.input, flag='--out', input_flag='--input')
        return
    from oars.data.labelme import list_labelme_files

    inputs = {'torchvision2oars': lambda: [args.input],
              'voc2coco': lambda: [osp.join(args.voc_root, args.split)],
              'labelme2coco': lambda: list_labelme_files(args.input)}[args.command]()
    check_new_file(args.out, args.overwrite, flag='--out', inputs=tuple(str(p) for p in inputs))


if __name__ == '__main__':
    run_cli(main)
