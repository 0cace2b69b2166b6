"""Embedded demo data set: coloured shapes on textured backgrounds, generated (never downloaded).

Why: every task's demo, end-to-end test and tutorial needs a small, learnable data set that exists
offline. Each image holds 1-4 shapes (circle, square, triangle) with random size, position, rotation and
colour; later shapes occlude earlier ones. Backgrounds mix a base colour, a gradient, optional stripes and
smooth plus pixel noise. Shape colours are chosen to contrast with the background under them, so a small
network learns the classes quickly, but the class is only in the *shape*, never in the colour.

Layout written under ``out_dir``::

    images/{train,val}/NNNN.png            BGR images (cv2)
    labels/{train,val}/NNNN.png            palette PNG, indices 0=background 1=circle 2=square 3=triangle
    annotations/instances_{train,val}.json COCO instances (polygons of the visible parts)
    meta.json                              generation parameters; a matching file skips regeneration

Every image comes from its own generator seeded with ``(seed, split, index)``, so a set is reproducible
byte for byte and an image does not depend on how many others were asked for.

Run ``python -m oars.data.demo_shapes --out data/demo_shapes`` to write it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import numpy as np

from oars.data.generated_set import GeneratedSet, check_int_arg, count_files, generator_main, run_generator
from oars_deploy.draw import save_label_png
from oars_deploy.words import plural

CLASSES: tuple[str, ...] = ('background', 'circle', 'square', 'triangle')
# RGB colours of the label PNG palette, index = class id (255, the usual ignore index, is white).
PALETTE: tuple[tuple[int, int, int], ...] = ((0, 0, 0), (230, 60, 60), (60, 190, 90), (70, 110, 240))
SPLITS: tuple[str, ...] = ('train', 'val')
MIN_VISIBLE_AREA = 20  # instances with fewer visible pixels get no COCO annotation
FORMAT_VERSION = 1
_GENERATOR_NAME = 'oars.data.demo_shapes'
_MIN_CONTRAST = 100.0  # wanted L2 distance (0-255 units) between a shape colour and the background under it


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Float32 HxWx3 texture: base colour + linear gradient + optional stripes + smooth noise."""
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5
    xx, yy = np.meshgrid(coords, coords)
    img = np.empty((size, size, 3), dtype=np.float32)
    img[:] = rng.uniform(50.0, 205.0, 3).astype(np.float32)

    theta = rng.uniform(0.0, 2.0 * np.pi)
    ramp = xx * np.cos(theta) + yy * np.sin(theta)
    img += ramp[..., None] * rng.uniform(-90.0, 90.0, 3).astype(np.float32)

    if rng.random() < 0.6:
        phi = rng.uniform(0.0, np.pi)
        cycles = rng.uniform(2.0, 12.0)
        wave = np.sin(2.0 * np.pi * cycles * (xx * np.cos(phi) + yy * np.sin(phi)) + rng.uniform(0, 2 * np.pi))
        if rng.random() < 0.4:
            wave = np.sign(wave)  # hard-edged stripes
        img += wave[..., None] * rng.uniform(-30.0, 30.0, 3).astype(np.float32)

    grid = int(rng.integers(3, 9))
    coarse = rng.normal(0.0, 1.0, (grid, grid, 3)).astype(np.float32)
    img += cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC) * np.float32(rng.uniform(5.0, 25.0))
    return img


def _shape_mask(rng: np.random.Generator, cls: int, size: int, object_scale: float = 1.0) -> np.ndarray:
    """Filled uint8 mask (0/1) of one shape, its circumradius ``object_scale`` x 9-22 % of ``size``; points use 4
    fractional bits for sub-pixel placement."""
    mask = np.zeros((size, size), dtype=np.uint8)
    radius = rng.uniform(0.09, 0.22) * object_scale * size  # circumradius
    centre = rng.uniform(0.1 * size, 0.9 * size, 2)
    shift, scale = 4, 16.0
    if cls == 1:  # circle, radius a bit below the circumradius so areas of the classes are alike
        c = tuple(int(v) for v in np.round(centre * scale))
        cv2.circle(mask, c, int(round(0.8 * radius * scale)), 1, thickness=-1, shift=shift)
        return mask
    if cls == 2:  # square, any rotation
        angles = rng.uniform(0.0, np.pi / 2) + np.arange(4) * (np.pi / 2)
        r = np.full(4, radius * 0.9)
    else:  # triangle, near-equilateral with jittered vertices
        angles = rng.uniform(0.0, 2 * np.pi / 3) + np.arange(3) * (2 * np.pi / 3) + rng.uniform(-0.15, 0.15, 3)
        r = radius * rng.uniform(0.9, 1.1, 3)
    pts = centre + np.stack([r * np.cos(angles), r * np.sin(angles)], axis=1)
    cv2.fillConvexPoly(mask, np.round(pts * scale).astype(np.int32), 1, shift=shift)
    return mask


def _pick_colour(rng: np.random.Generator, bg_mean: np.ndarray) -> np.ndarray:
    """Colour far from the background mean under the shape (best of 8 candidates if none is far enough)."""
    candidates = rng.uniform(0.0, 255.0, (8, 3)).astype(np.float32)
    dist = np.linalg.norm(candidates - bg_mean, axis=1)
    good = np.flatnonzero(dist >= _MIN_CONTRAST)
    return candidates[good[0] if good.size else int(np.argmax(dist))]


def render_sample(rng: np.random.Generator, size: int, object_scale: float = 1.0, max_objects: int = 4,
                  class_weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one sample of 1 to ``max_objects`` shapes (``object_scale``: see :func:`_shape_mask`; ``class_weights``:
    each shape's class drawn with these relative weights, one per foreground class, instead of uniformly); returns
    (BGR uint8 image, instance map uint8 [0=none, k=k-th shape], classes [K])."""
    img = _background(rng, size)
    num_shapes = int(rng.integers(1, max_objects + 1))
    if class_weights is None:
        classes = rng.integers(1, len(CLASSES), num_shapes)
    else:
        classes = rng.choice(np.arange(1, len(CLASSES)), num_shapes, p=class_weights / class_weights.sum())
    inst = np.zeros((size, size), dtype=np.uint8)
    shade = (np.arange(size, dtype=np.float32) / size - 0.5)[None, :] * np.ones((size, 1), np.float32)
    for k, cls in enumerate(classes, start=1):
        mask = _shape_mask(rng, int(cls), size, object_scale).astype(bool)
        if not mask.any():
            continue
        colour = _pick_colour(rng, img[mask].mean(axis=0))
        tint = rng.uniform(-20.0, 20.0)
        fill = colour[None, None, :] + (shade if rng.random() < 0.5 else shade.T)[..., None] * tint
        img = np.where(mask[..., None], fill, img)
        inst[mask] = k
    img += rng.normal(0.0, rng.uniform(2.0, 7.0), img.shape).astype(np.float32)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8), inst, classes


def _corner_grid(mask: np.ndarray) -> np.ndarray:
    """(H+1)x(W+1) grid of pixel corners touching the mask: its contour runs along pixel edges.

    COCO tools rasterise polygons in corner coordinates (pixel x spans [x, x+1)), so the contour of
    this grid, read directly as (x, y) corner coordinates, reproduces the mask; the contour of the mask
    itself would run through pixel centres and lose a pixel on the right and bottom.
    """
    p = np.pad(mask, 1)
    return p[:-1, :-1] | p[:-1, 1:] | p[1:, :-1] | p[1:, 1:]


def _instance_annotation(visible: np.ndarray) -> dict | None:
    """COCO fields (segmentation, bbox, area) of one visible 0/1 mask, or None when too little is visible.

    bbox and area come from the visible pixels. Holes (a later shape wholly inside this one) are covered
    by the outer polygon, as COCO polygons cannot express them; area counts only the visible pixels.
    """
    area = int(visible.sum())
    if area < MIN_VISIBLE_AREA:
        return None
    contours, _ = cv2.findContours(_corner_grid(visible), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    polygons = [c.reshape(-1).astype(float).tolist() for c in contours if len(c) >= 3]
    ys, xs = np.nonzero(visible)
    x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())
    return {
        'segmentation': polygons,
        'bbox': [float(x0), float(y0), float(x1 - x0 + 1), float(y1 - y0 + 1)],
        'area': float(area),
        'iscrowd': 0,
    }


def _write_split(root: Path, split: str, num: int, size: int, seed: int, object_scale: float = 1.0,
                 max_objects: int = 4, class_weights: np.ndarray | None = None) -> int:
    """Write images, labels and the COCO file of one split; returns the number of annotations."""
    img_dir, lbl_dir = root / 'images' / split, root / 'labels' / split
    img_dir.mkdir(parents=True, exist_ok=True)
    lbl_dir.mkdir(parents=True, exist_ok=True)
    digits = max(4, len(str(max(num - 1, 0))))
    images, annotations = [], []
    for idx in range(num):
        rng = np.random.default_rng([seed, SPLITS.index(split), idx])
        img, inst, classes = render_sample(rng, size, object_scale, max_objects, class_weights)
        name = f'{idx:0{digits}d}.png'
        if not cv2.imwrite(str(img_dir / name), img):
            raise OSError(f'cv2.imwrite failed for {img_dir / name}')
        lut = np.concatenate([[0], classes]).astype(np.uint8)
        save_label_png(lut[inst], PALETTE, lbl_dir / name)
        image_id = idx + 1
        images.append({'id': image_id, 'file_name': name, 'width': size, 'height': size})
        for k, cls in enumerate(classes, start=1):
            ann = _instance_annotation((inst == k).astype(np.uint8))
            if ann is not None:
                ann.update(id=len(annotations) + 1, image_id=image_id, category_id=int(cls))
                annotations.append(ann)
    coco = {
        'info': {'description': f'oars demo shapes ({split})', 'version': str(FORMAT_VERSION)},
        'licenses': [],
        'images': images,
        'annotations': annotations,
        'categories': [{'id': i, 'name': n, 'supercategory': 'shape'} for i, n in enumerate(CLASSES) if i],
    }
    ann_dir = root / 'annotations'
    ann_dir.mkdir(parents=True, exist_ok=True)
    (ann_dir / f'instances_{split}.json').write_text(json.dumps(coco))
    return len(annotations)


def _owned_paths(root: Path) -> list[Path]:
    """Everything generate() writes besides meta.json; the only paths it ever deletes."""
    paths = []
    for split in SPLITS:
        paths += [root / 'images' / split, root / 'labels' / split, root / 'annotations' / f'instances_{split}.json']
    return paths


def _result(root: Path, params: dict, num_annotations: dict, skipped: bool) -> dict:
    return {
        'out_dir': str(root),
        'skipped': skipped,
        'classes': list(CLASSES),
        'num_images': {s: params[f'num_{s}'] for s in SPLITS},
        'num_annotations': dict(num_annotations),
        'images': {s: str(root / 'images' / s) for s in SPLITS},
        'labels': {s: str(root / 'labels' / s) for s in SPLITS},
        'annotations': {s: str(root / 'annotations' / f'instances_{s}.json') for s in SPLITS},
        'meta': str(root / 'meta.json'),
    }


def _is_complete(root: Path, params: dict) -> bool:
    for split in SPLITS:
        n = params[f'num_{split}']
        if not (root / 'annotations' / f'instances_{split}.json').is_file():
            return False
        if any(count_files(root / kind / split, '*.png') != n for kind in ('images', 'labels')):
            return False
    return True


def generate(
    out_dir: str | Path,
    num_train: int = 300,
    num_val: int = 60,
    size: int = 128,
    seed: int = 0,
    overwrite: bool = False,
    object_scale: float = 1.0,
    max_objects: int = 4,
    train_class_weights: tuple[float, ...] | None = None,
) -> dict:
    """Write the demo set under ``out_dir`` unless a complete set with the same parameters is there.

    ``object_scale`` (> 0) multiplies the shapes' sizes and ``max_objects`` caps their number per image: the demo
    uses 1 and 4; ``benchmarks/large_objects.py`` draws few large shapes, as photos show their objects. Left at
    those defaults, neither enters meta.json, so a set written before they existed is reused as it is.
    ``train_class_weights`` (one relative weight per foreground class, e.g. ``(1, 1, 0.1)``) draws the training
    split's shapes long-tailed (the validation split stays uniform): the class-aware sampling demo's data.

    Returns a dict with ``out_dir``, ``skipped`` (True when the existing set was reused), ``classes``,
    ``num_images`` and ``num_annotations`` per split, and the ``images``/``labels``/``annotations`` paths
    per split. A set written earlier by this generator with other parameters is replaced; a non-empty
    ``out_dir`` that this generator did not write is refused unless ``overwrite=True`` (and even then
    only the paths listed above are removed).
    """
    owner = 'demo_shapes.generate'
    for key, value, low in (('num_train', num_train, 0), ('num_val', num_val, 0), ('size', size, 32)):
        check_int_arg(owner, key, value, low)
    if num_train + num_val == 0:
        raise ValueError(f'{owner}: num_train and num_val are both 0; nothing to generate')
    check_int_arg(owner, 'seed', seed, 0)
    check_int_arg(owner, 'max_objects', max_objects, 1)
    if isinstance(object_scale, bool) or not isinstance(object_scale, int | float) or not 0 < object_scale <= 4:
        raise ValueError(f'{owner}: object_scale must be a number in (0, 4], got {object_scale!r}')
    weights = None
    if train_class_weights is not None:
        weights = np.asarray(train_class_weights, dtype=np.float64)
        if weights.shape != (len(CLASSES) - 1,) or not np.all(weights > 0):
            raise ValueError(f'{owner}: train_class_weights must be {len(CLASSES) - 1} positive numbers (one per '
                             f'class of {", ".join(CLASSES[1:])}), got {train_class_weights!r}')
    root = Path(out_dir)
    params = {'num_train': int(num_train), 'num_val': int(num_val), 'size': int(size), 'seed': int(seed)}
    params.update({k: v for k, v, default in (('object_scale', float(object_scale), 1.0),
                                              ('max_objects', int(max_objects), 4)) if v != default})
    if weights is not None:
        params['train_class_weights'] = [float(w) for w in weights]
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        'images/, labels/, annotations/instances_*.json and meta.json')
    meta = gset.reusable_meta()
    if not overwrite and meta is not None and _is_complete(root, params):
        return _result(root, params, meta.get('num_annotations', {}), skipped=True)
    gset.begin(overwrite, classes=list(CLASSES), palette=[list(c) for c in PALETTE])
    counts = {split: _write_split(root, split, params[f'num_{split}'], size, seed, float(object_scale),
                                  int(max_objects), weights if split == 'train' else None) for split in SPLITS}
    gset.finish(num_annotations=counts)
    return _result(root, params, counts, skipped=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m oars.data.demo_shapes`` and ``tools/demo_data.py``)."""
    parser.add_argument('--out', default='data/demo_shapes', help='output root (default: data/demo_shapes)')
    parser.add_argument('--num-train', type=int, default=300)
    parser.add_argument('--num-val', type=int, default=60)
    parser.add_argument('--size', type=int, default=128, help='image side in pixels')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--object-scale', type=float, default=1.0,
                        help='multiply the shapes\' sizes (default 1: 9-22 %% of the side as circumradius)')
    parser.add_argument('--max-objects', type=int, default=4, help='at most this many shapes per image (default 4)')
    parser.add_argument('--train-class-weights', type=_weights, default=None, metavar='W1,W2,W3',
                        help='long-tailed training split: relative class weights (circle, square, triangle), e.g. '
                        '1,1,0.1 (the validation split stays uniform)')
    parser.add_argument('--overwrite', action='store_true', help='regenerate even if an identical set exists')


def _weights(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(','))
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected comma-separated numbers such as 1,1,0.1, got {text!r}') from None


def run(args: argparse.Namespace) -> int:
    """Generate the set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: bad sizes or counts, or ``--out`` holding other files (naming the folder).
    """
    res = run_generator('demo_shapes', generate, args.out, args.num_train, args.num_val, args.size, args.seed,
                        args.overwrite, args.object_scale, args.max_objects, args.train_class_weights)
    for split in SPLITS:
        print(f'  {split}: {plural(res["num_images"][split], "image")} -> {res["images"][split]}, '
              f'labels -> {res["labels"][split]}, {res["num_annotations"].get(split, "?")} instances -> '
              f'{res["annotations"][split]}')
    print(f'  classes: {", ".join(CLASSES)}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the set and print what was written (or that an identical set was reused)."""
    return generator_main('python -m oars.data.demo_shapes', __doc__.split('\n')[0], add_arguments, run, argv)


if __name__ == '__main__':
    raise SystemExit(main())
