"""Convert annotations to COCO instances json.

  python tools/convert.py voc2coco --voc-root data/VOCdevkit/VOC2007 --split ImageSets/Main/trainval.txt \\
      --out data/VOCdevkit/VOC2007/annotations/trainval.json [--classes a b ...]
  python tools/convert.py labelme2coco --input DIR_OF_LABELME_JSON --out ann.json [--classes a b ...] \\
      [--image-root DIR]
"""

import argparse

from detection.datasets.converters import labelme_to_coco, summary, voc_to_coco, write_coco_json
from oars.cli import run_cli


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
    args = parser.parse_args()
    if args.command == 'voc2coco':
        coco = voc_to_coco(args.voc_root, args.split, classes=args.classes, img_suffix=args.img_suffix,
                           on_bad_annotation=args.on_bad_annotation)
    else:
        coco = labelme_to_coco(args.input, classes=args.classes, image_root=args.image_root)
    write_coco_json(coco, args.out)
    print(summary(coco, args.out))


if __name__ == '__main__':
    run_cli(main)
