"""Converters between YOLO txt datasets (ultralytics layout) and COCO instances json (``tools/convert.py yolo2coco``
and ``coco2yolo``).

Both read through the datasets (``YOLOTxtDataset``, ``CocoDataset``), so a file that a training run would refuse
is refused here with the same message, and both agree with the datasets on every coordinate:
``cx = (x1 + x2) / 2 / width``, ``w = (x2 - x1) / width`` (likewise y and h), boxes clipped to the image.
COCO category ids become YOLO class ids 0..K-1 in increasing id order and back 1..K; names are kept.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter

import yaml

from detection.datasets.coco import CocoDataset, load_coco
from detection.datasets.yolo_files import label_path
from detection.datasets.yolo_txt import YOLOTxtDataset
from oars.errors import DataError
from oars_deploy.atomic import atomic_write
from oars_deploy.output_paths import OutputPathError

DATA_YAML = 'data.yaml'
DIGITS = '.8g'  # normalised values: 1e-8 relative, < 1e-3 px on images up to 100,000 px


def yolo_to_coco(data_yaml: str, split: str = 'train') -> tuple[dict, str]:
    """COCO dict of one split of a YOLO dataset.

    Args:
        data_yaml: the ultralytics data YAML.
        split: ``train``, ``val`` or ``test``.

    Returns:
        ``(coco, image_root)``: image ids are the dataset's ``img_id`` (1..N, sorted paths), ``file_name`` is
        relative to ``image_root`` (the split's folder when it is one folder, else the dataset's ``path``): the
        ``data_prefix.img`` of a ``CocoDataset`` reading the result. Category ids 1..K follow the YAML's names.
    """
    ds = YOLOTxtDataset(data_yaml=data_yaml, split=split, test_mode=True, filter_empty_gt=False,
                        serialize_data=False)
    sources = ds.data.sources(split)
    image_root = sources[0] if len(sources) == 1 and os.path.isdir(sources[0]) else ds.data.root
    images, annotations = [], []
    for info in ds.data_list:
        images.append({'id': info['img_id'], 'file_name': os.path.relpath(info['img_path'], image_root),
                       'height': info['height'], 'width': info['width']})
        for inst in info['instances']:
            x1, y1, x2, y2 = inst['bbox']
            annotations.append({'id': len(annotations) + 1, 'image_id': info['img_id'],
                                'category_id': inst['bbox_label'] + 1, 'bbox': [x1, y1, x2 - x1, y2 - y1],
                                'area': (x2 - x1) * (y2 - y1), 'iscrowd': 0, 'segmentation': []})
    categories = [{'id': i, 'name': n, 'supercategory': 'none'} for i, n in enumerate(ds.metainfo['classes'], 1)]
    return ({'info': {'description': f'converted from YOLO {ds.data.yaml_path} ({split})'}, 'licenses': [],
             'images': images, 'annotations': annotations, 'categories': categories}, image_root)


def _yolo_line(label: int, box: list[float], width: int, height: int) -> str:
    x1, y1, x2, y2 = box
    values = ((x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height)
    return f'{label} ' + ' '.join(format(v, DIGITS) for v in values)


def _place_image(src: str, dst: str, copy: bool) -> None:
    """A link to (or a copy of) ``src`` at ``dst``; an existing ``dst`` (a link from an earlier run) is removed
    first, never written through (it may point at the user's image)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        if os.path.isdir(dst) and not os.path.islink(dst):
            raise OutputPathError(f'{dst} is a folder; expected to place the image {src} there')
        os.unlink(dst)
    if copy:
        shutil.copy2(src, dst)
    else:
        os.symlink(os.path.realpath(src), dst)


SPLITS = ('train', 'val', 'test')


def _yaml_names(names: object) -> list[str] | None:
    """A data YAML's ``names`` (a list, or ``{id: name}`` with ids 0..K-1) as a list; None when it is neither."""
    if isinstance(names, dict) and sorted(names) == list(range(len(names))):
        return [str(names[i]) for i in range(len(names))]
    if isinstance(names, list):
        return [str(n) for n in names]
    return None


def _data_yaml(out: str, split: str, names: list[str], source: str) -> dict:
    """The data YAML for ``out`` with ``split`` added: an existing one keeps its other splits (train and val
    converted one after the other into one folder) when it lists the same class names in the same order.

    Raises:
        DataError: the existing file cannot be read, or its classes differ from ``names`` (from ``source``) while
            it holds another split, whose label ids would then mean other classes.
    """
    path = os.path.join(out, DATA_YAML)
    if not os.path.isfile(path):
        return {'path': '.', split: f'images/{split}', 'names': dict(enumerate(names))}
    try:
        with open(path, encoding='utf-8') as f:
            old = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise DataError(f'coco2yolo: cannot read the existing {path} ({err}); expected the data YAML of the YOLO '
                        f'dataset that split {split!r} is added to') from err
    if not isinstance(old, dict):
        raise DataError(f'coco2yolo: the existing {path} holds a {type(old).__name__}; expected a mapping with '
                        f'names and splits (the data YAML of the YOLO dataset that split {split!r} is added to)')
    others = [s for s in SPLITS if s != split and s in old]
    old_names = _yaml_names(old.get('names'))
    if others and old_names != names:
        raise DataError(f'coco2yolo: {path} (splits {others}) lists the classes {old_names} but {source} has '
                        f'{names}; a split added to a dataset needs the same classes in the same order (nothing '
                        'was written: convert into a new --out, or fix the category list)')
    data = dict(old) if others else {}
    data.update({'path': '.', split: f'images/{split}', 'names': dict(enumerate(names))})
    return {k: data[k] for k in ('path', *SPLITS, 'names') if k in data}


def coco_to_yolo(ann_file: str, images: str, out: str, split: str = 'train', copy_images: bool = False) -> dict:
    """Write a YOLO dataset of a COCO json: ``out/labels/<split>/<file_name stem>.txt``, the images at
    ``out/images/<split>/<file_name>`` (symbolic links to ``images/<file_name>``, or copies), and
    ``out/data.yaml``. The images folder is only read.

    Args:
        ann_file: the COCO instances json.
        images: the folder its ``file_name`` s are relative to.
        out: the output folder (the CLI checks first that it is empty and apart from the inputs).
        split: the split's name in the paths and the YAML.
        copy_images: copy instead of linking (file systems without symbolic links).

    Returns:
        ``{'images': N, 'objects': M, 'left_out': Counter of reasons, 'names': [...], 'data_yaml': path}``.
        Crowd annotations (``iscrowd: 1``) have no YOLO form and are left out (counted), as ultralytics does.
    """
    coco = load_coco(os.path.abspath(ann_file), 'coco2yolo', need_annotations=False)
    cats = sorted(coco.dataset['categories'], key=lambda c: c['id'])
    names = [str(c['name']) for c in cats]
    data = _data_yaml(out, split, names, ann_file)  # before anything is written: the classes must agree
    ds = CocoDataset(ann_file=os.path.abspath(ann_file), data_prefix={'img': os.path.abspath(images)},
                     classes=names, test_mode=True, filter_empty_gt=False, serialize_data=False)
    img_dir = os.path.join(out, 'images', split)
    left_out: Counter = Counter()
    written: dict[str, str] = {}
    objects = 0
    for info in ds.data_list:
        rel = os.path.relpath(info['img_path'], os.path.abspath(images))
        dst = os.path.join(img_dir, rel)
        labels = label_path(os.path.abspath(dst))
        if labels in written:
            raise DataError(f'coco2yolo: {ann_file}: images {written[labels]!r} and {rel!r} would share the label file '
                            f'{labels} (same name, other suffix); expected distinct image names')
        written[labels] = rel
        lines = []
        for inst in info['instances']:
            if inst['ignore_flag']:
                left_out['crowd (iscrowd: 1)'] += 1
                continue
            lines.append(_yolo_line(inst['bbox_label'], inst['bbox'], info['width'], info['height']))
        objects += len(lines)
        atomic_write(labels, ''.join(line + '\n' for line in lines))
        _place_image(info['img_path'], dst, copy_images)
    data_yaml = os.path.join(out, DATA_YAML)
    atomic_write(data_yaml, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return {'images': len(ds.data_list), 'objects': objects, 'left_out': left_out, 'names': names,
            'data_yaml': data_yaml}


def coco2yolo_summary(result: dict, out: str, split: str) -> str:
    """One line describing what :func:`coco_to_yolo` wrote."""
    left = ', '.join(f'{n} {k}' for k, n in result['left_out'].items())
    return (f"wrote {out}: {result['images']} images (labels/{split}, images/{split}), {result['objects']} objects, "
            f"{len(result['names'])} classes {result['names']}; {result['data_yaml']}"
            + (f'; left out {left}' if left else ''))
