"""Paired demo set for the pix2pix demo: the demo shapes' label maps rendered as "photos" by a fixed rule.

Why: the demo shapes' own images (``python -m oars.data.demo_shapes``) give every shape and background a random
colour, so label map -> image is not a function a model can learn (pix2pix then outputs the mean colour: a blur at
13 dB PSNR). Like facades or Cityscapes label -> photo, this set's target is a deterministic rendering of the label
map alone: a fixed colour per class, a raised "pillow" shading that brightens towards the inside of each region, a
dark outline where classes meet and a soft drop shadow cast on the background. Every effect is local and
translation-equivariant (distance transforms, 3x3 morphology, a shifted blur), so it survives the random crops of
training and a convolutional generator can learn it in minutes on a CPU.

Layout written under ``out_dir`` (the ``PairedImageDataset`` two-folder layout)::

    labels/{train,val}/NNNN.png   A: the demo shapes' palette label PNGs, copied byte for byte
    images/{train,val}/NNNN.png   B: the rendered BGR photos (cv2)
    meta.json                     generation parameters and the source set's; a matching complete set is reused

The source set must exist (``make demo-data`` or ``python -m oars.data.demo_shapes --out data/demo_shapes``); it
is only read. Run ``python -m gan.demo_pairs --shapes data/demo_shapes --out data/demo_pix2pix`` (about a second).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import cv2
import numpy as np

from oars.data.generated_set import GeneratedSet, count_files, generator_main, run_generator
from oars.data.transforms.loading import read_label_map

SPLITS: tuple[str, ...] = ('train', 'val')
FORMAT_VERSION = 1
_GENERATOR_NAME = 'gan.demo_pairs'
_SOURCE_GENERATOR = 'oars.data.demo_shapes'
# RGB colour per class id of the demo shapes (background, circle, square, triangle): sand, brick red, leaf green,
# slate blue; far apart so the outline and shading stay visible on each
CLASS_COLOURS: tuple[tuple[int, int, int], ...] = ((214, 196, 160), (196, 64, 52), (58, 150, 72), (64, 96, 196))
# the rendering rule, as fractions of the image side (so a 64-px and a 128-px rendering look alike)
_PILLOW_DEPTH = 0.07  # distance from a region's edge at which its shading reaches full brightness
_SHADOW_SHIFT = 0.025  # drop shadow offset (down and right)
_SHADOW_BLUR = 0.015  # Gaussian sigma of the shadow's edge
_EDGE_DARKEN = 0.4  # outline pixels keep this fraction of their colour
_SHADOW_DARKEN = 0.45  # a fully shadowed background pixel loses this fraction of its brightness


def render_photo(label: np.ndarray) -> np.ndarray:
    """Render one label map as the pix2pix target: a function of the label map alone, so it can be learned.

    Args:
        label: ``[H, W]`` integer class ids in ``[0, len(CLASS_COLOURS))`` (0 = background).

    Returns:
        ``[H, W, 3]`` uint8 BGR image: class colour x pillow shading, outlines where classes meet, a soft drop
        shadow on the background.

    Raises:
        ValueError: ``label`` is not a 2-D integer array, or holds an id without a colour (255 = ignore included).
    """
    label = np.asarray(label)
    if label.ndim != 2 or not np.issubdtype(label.dtype, np.integer) or min(label.shape) < 2:
        raise ValueError(f'render_photo: label must be an [H, W] integer array (H, W >= 2), got {label.dtype} '
                         f'{label.shape}')
    bad = np.setdiff1d(np.unique(label), np.arange(len(CLASS_COLOURS)))
    if bad.size:
        raise ValueError(f'render_photo: class ids {bad.tolist()} have no colour; expected ids in '
                         f'[0, {len(CLASS_COLOURS) - 1}]')
    label = label.astype(np.uint8)
    side = float(min(label.shape))
    colours = np.asarray(CLASS_COLOURS, dtype=np.float32)[:, ::-1]  # RGB -> BGR rows
    img = colours[label]

    # pillow shading: each shape brightens from 0.65 at its edge to 1.1 inside (distance to another class)
    fg = label > 0
    dist = np.zeros(label.shape, dtype=np.float32)
    for cls in np.unique(label[fg]):
        region = (label == cls).astype(np.uint8)
        dist = np.where(region > 0, cv2.distanceTransform(region, cv2.DIST_L2, 3), dist)
    pillow = np.sqrt(np.clip(dist / (_PILLOW_DEPTH * side), 0.0, 1.0))
    img = np.where(fg[..., None], img * (0.65 + 0.45 * pillow)[..., None], img)

    # drop shadow: the foreground shifted down-right and blurred darkens the background under it
    shift = max(1, int(round(_SHADOW_SHIFT * side)))
    cast = np.zeros(label.shape, dtype=np.float32)
    cast[shift:, shift:] = fg[:-shift, :-shift]
    sigma = max(0.5, _SHADOW_BLUR * side)
    cast = cv2.GaussianBlur(cast, (0, 0), sigma)
    img = np.where(fg[..., None], img, img * (1.0 - _SHADOW_DARKEN * cast)[..., None])

    # outline: pixels whose 3x3 neighbourhood holds another class
    kernel = np.ones((3, 3), np.uint8)
    edge = cv2.dilate(label, kernel) != cv2.erode(label, kernel)
    img = np.where(edge[..., None], img * _EDGE_DARKEN, img)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _source_params(shapes: Path) -> dict:
    """The demo shapes set's meta.json params; ValueError naming the folder when it is not a complete set."""
    try:
        meta = json.loads((shapes / 'meta.json').read_text())
    except (OSError, ValueError):
        meta = None
    if not isinstance(meta, dict) or meta.get('generator') != _SOURCE_GENERATOR or not meta.get('complete'):
        raise ValueError(f'demo_pairs.generate: {shapes} holds no complete demo shapes set (its meta.json from '
                         f'{_SOURCE_GENERATOR}); write it first: python -m oars.data.demo_shapes --out {shapes}')
    return {'params': meta.get('params'), 'format_version': meta.get('format_version')}


def _owned_paths(root: Path) -> list[Path]:
    """Everything generate() writes besides meta.json; the only paths it ever deletes."""
    return [root / kind / split for kind in ('labels', 'images') for split in SPLITS]


def _result(root: Path, counts: dict[str, int], skipped: bool) -> dict:
    return {
        'out_dir': str(root),
        'skipped': skipped,
        'num_pairs': dict(counts),
        'labels': {s: str(root / 'labels' / s) for s in SPLITS},
        'images': {s: str(root / 'images' / s) for s in SPLITS},
        'meta': str(root / 'meta.json'),
    }


def _source_files(shapes: Path) -> dict[str, list[Path]]:
    return {s: sorted((shapes / 'labels' / s).glob('*.png')) if (shapes / 'labels' / s).is_dir() else []
            for s in SPLITS}


def generate(shapes_dir: str | Path, out_dir: str | Path, overwrite: bool = False) -> dict:
    """Write the paired set for every label map of the demo shapes set unless a complete one is there.

    Args:
        shapes_dir: a demo shapes set (``python -m oars.data.demo_shapes``); only read.
        out_dir: output root; must differ from ``shapes_dir``.
        overwrite: replace the owned folders of a non-empty ``out_dir`` this generator did not write.

    Returns:
        dict with ``out_dir``, ``skipped`` (True when an existing set from the same source was reused),
        ``num_pairs`` per split and the ``labels`` / ``images`` folders per split.

    Raises:
        ValueError: ``shapes_dir`` is not a complete demo shapes set, is ``out_dir``, or a label map holds a class
            id without a colour (``DataError``, naming the file).
        FileExistsError: ``out_dir`` is not empty and was not written by this generator (and no ``overwrite``).
    """
    shapes, root = Path(shapes_dir), Path(out_dir)
    if shapes.resolve() == root.resolve():
        raise ValueError(f'demo_pairs.generate: --out {root} is the source set itself; choose another folder '
                         f'(the demo shapes set is never modified)')
    source = _source_params(shapes)
    files = _source_files(shapes)
    counts = {s: len(files[s]) for s in SPLITS}
    params = {'source': source, 'num_pairs': counts}
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        'labels/, images/ and meta.json')
    complete = all(count_files(root / kind / s, '*.png') == n for s, n in counts.items()
                   for kind in ('labels', 'images'))
    if not overwrite and gset.reusable_meta() is not None and complete:
        return _result(root, counts, skipped=True)
    gset.begin(overwrite, classes=['background', 'circle', 'square', 'triangle'],
               class_colours_rgb=[list(c) for c in CLASS_COLOURS])
    for split in SPLITS:
        lbl_dir, img_dir = root / 'labels' / split, root / 'images' / split
        lbl_dir.mkdir(parents=True, exist_ok=True)
        img_dir.mkdir(parents=True, exist_ok=True)
        for src in files[split]:
            label = read_label_map(str(src))  # its errors name the file
            try:
                photo = render_photo(label)
            except ValueError as err:
                raise type(err)(f'{src}: {err}') from None
            if not cv2.imwrite(str(img_dir / src.name), photo):
                raise OSError(f'cv2.imwrite failed for {img_dir / src.name}')
            shutil.copyfile(src, lbl_dir / src.name)
    gset.finish()
    return _result(root, counts, skipped=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m gan.demo_pairs`` and ``tools/demo_data.py pairs``)."""
    parser.add_argument('--shapes', default='data/demo_shapes',
                        help='the demo shapes set to read (default: data/demo_shapes)')
    parser.add_argument('--out', default='data/demo_pix2pix', help='output root (default: data/demo_pix2pix)')
    parser.add_argument('--overwrite', action='store_true', help='replace labels/ and images/ of a foreign folder')


def run(args: argparse.Namespace) -> int:
    """Generate the paired set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: no demo shapes set at ``--shapes``, a label map with an unknown class id (naming the file), or
            ``--out`` holding other files.
    """
    res = run_generator('demo_pairs', generate, args.shapes, args.out, args.overwrite)
    for split in SPLITS:
        print(f'  {split}: {res["num_pairs"][split]} pairs: labels -> {res["labels"][split]}, '
              f'photos -> {res["images"][split]}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the paired set and print what was written (or that an identical set was reused)."""
    return generator_main('python -m gan.demo_pairs', __doc__.split('\n')[0], add_arguments, run, argv)


if __name__ == '__main__':
    raise SystemExit(main())
