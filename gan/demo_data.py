"""Embedded class-conditional demo set for the CGAN demo: coloured digit glyphs, generated (never downloaded).

Why: a conditional GAN needs a small set where the class is visible and learnable in minutes on a CPU. Each
32x32 image holds one digit 0-9 drawn with ``cv2.putText`` in one of two bold Hershey fonts, 2-3 px strokes
filling most of the image, with a small random scale, offset and rotation, in a colour that contrasts with a
smooth two-colour background. The class is the digit, never the colour. (Format 1 also drew 1-px strokes in four
fonts at up to 12% offsets: after 1920 iterations the CGAN demo's samples were still blobs.)

Layout written under ``out_dir`` (the ``ImageFolderGANDataset`` layout: one folder per class)::

    train/<digit>/NNNN.png   BGR PNGs (cv2), ``num_per_class_train`` per digit
    val/<digit>/NNNN.png     ``num_per_class_val`` per digit
    meta.json                generation parameters; a matching complete set skips regeneration

Every image comes from its own generator seeded with ``(seed, split, digit, index)``, so a set is reproducible
byte for byte. Run ``python -m gan.demo_data --out data/demo_gan`` to write it (about a second).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from oars.data.generated_set import GeneratedSet, check_int_arg, count_files, generator_main, run_generator

CLASSES: tuple[str, ...] = tuple(str(d) for d in range(10))
SPLITS: tuple[str, ...] = ('train', 'val')
FORMAT_VERSION = 2
# the writer's name in meta.json since the first version (the module lived in oars.data): kept, so that sets
# written before the move are still recognised and reused
_GENERATOR_NAME = 'oars.data.demo_gan'
_FONTS = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX)
_MIN_CONTRAST = 120.0  # L2 distance (0-255 units) wanted between glyph and background colours


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Float32 HxWx3: a linear blend of two dark-to-mid colours along a random direction."""
    c0, c1 = rng.uniform(0.0, 140.0, (2, 3)).astype(np.float32)
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size
    theta = rng.uniform(0.0, 2.0 * np.pi)
    ramp = np.clip(0.5 + (coords[None, :] - 0.5) * np.cos(theta) + (coords[:, None] - 0.5) * np.sin(theta), 0, 1)
    return c0 + ramp[..., None] * (c1 - c0)


def _glyph_colour(rng: np.random.Generator, bg_mean: np.ndarray) -> np.ndarray:
    """A colour at least ``_MIN_CONTRAST`` from the background mean (the farthest of 8 candidates otherwise)."""
    candidates = rng.uniform(60.0, 255.0, (8, 3)).astype(np.float32)
    dist = np.linalg.norm(candidates - bg_mean, axis=1)
    good = np.flatnonzero(dist >= _MIN_CONTRAST)
    return candidates[good[0] if good.size else int(np.argmax(dist))]


def render_digit(rng: np.random.Generator, digit: int, size: int = 32) -> np.ndarray:
    """One sample: BGR uint8 [size, size, 3] showing ``digit`` (0-9)."""
    font = _FONTS[int(rng.integers(len(_FONTS)))]
    thickness = int(round(rng.integers(2, 4) * size / 32.0))
    scale = rng.uniform(0.95, 1.1) * size / 32.0
    text = str(int(digit))
    (w, h), base = cv2.getTextSize(text, font, scale, thickness)
    mask = np.zeros((size, size), dtype=np.uint8)
    x = int(round((size - w) / 2 + rng.uniform(-0.05, 0.05) * size))
    y = int(round((size + h) / 2 + rng.uniform(-0.05, 0.05) * size))
    cv2.putText(mask, text, (x, y), font, scale, 255, thickness, cv2.LINE_AA)
    angle = rng.uniform(-8.0, 8.0)
    rot = cv2.getRotationMatrix2D((size / 2, size / 2), angle, 1.0)
    alpha = cv2.warpAffine(mask, rot, (size, size), flags=cv2.INTER_LINEAR).astype(np.float32)[..., None] / 255.0
    img = _background(rng, size)
    colour = _glyph_colour(rng, img.mean(axis=(0, 1)))
    img = img * (1.0 - alpha) + colour * alpha
    img += rng.normal(0.0, 3.0, img.shape).astype(np.float32)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _owned_paths(root: Path) -> list[Path]:
    """Everything generate() writes besides meta.json; the only paths it ever deletes."""
    return [root / split for split in SPLITS]


def _counts(params: dict) -> dict[str, int]:
    return {s: params[f'num_per_class_{s}'] for s in SPLITS}


def _is_complete(root: Path, params: dict) -> bool:
    return all(count_files(root / split / c, '*.png') == n for split, n in _counts(params).items() for c in CLASSES)


def _result(root: Path, params: dict, skipped: bool) -> dict:
    return {
        'out_dir': str(root),
        'skipped': skipped,
        'classes': list(CLASSES),
        'num_images': {s: n * len(CLASSES) for s, n in _counts(params).items()},
        'folders': {s: str(root / s) for s in SPLITS},
        'meta': str(root / 'meta.json'),
    }


def generate(out_dir: str | Path, num_per_class_train: int = 200, num_per_class_val: int = 20, size: int = 32,
             seed: int = 0, overwrite: bool = False) -> dict:
    """Write the demo set under ``out_dir`` unless a complete set with the same parameters is there.

    Returns a dict with ``out_dir``, ``skipped`` (True when the existing set was reused), ``classes``,
    ``num_images`` per split and the class-folder root per split (``folders``). A set written earlier by this
    generator with other parameters is replaced; a non-empty ``out_dir`` it did not write is refused unless
    ``overwrite=True`` (and even then only ``train/``, ``val/`` and ``meta.json`` are removed).
    """
    owner = 'demo_gan.generate'
    params = {'num_per_class_train': check_int_arg(owner, 'num_per_class_train', num_per_class_train, 0),
              'num_per_class_val': check_int_arg(owner, 'num_per_class_val', num_per_class_val, 0),
              'size': check_int_arg(owner, 'size', size, 16),
              'seed': check_int_arg(owner, 'seed', seed, 0)}
    if params['num_per_class_train'] + params['num_per_class_val'] == 0:
        raise ValueError(f'{owner}: num_per_class_train and num_per_class_val are both 0; nothing to generate')
    root = Path(out_dir)
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        'train/, val/ and meta.json')
    if not overwrite and gset.reusable_meta() is not None and _is_complete(root, params):
        return _result(root, params, skipped=True)
    gset.begin(overwrite, classes=list(CLASSES))
    for s_idx, (split, num) in enumerate(_counts(params).items()):
        for digit, name in enumerate(CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for idx in range(num):
                img = render_digit(np.random.default_rng([params['seed'], s_idx, digit, idx]), digit, params['size'])
                path = folder / f'{idx:04d}.png'
                if not cv2.imwrite(str(path), img):
                    raise OSError(f'cv2.imwrite failed for {path}')
    gset.finish()
    return _result(root, params, skipped=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m gan.demo_data`` and ``tools/demo_data.py``)."""
    parser.add_argument('--out', default='data/demo_gan', help='output root (default: data/demo_gan)')
    parser.add_argument('--num-per-class-train', type=int, default=200)
    parser.add_argument('--num-per-class-val', type=int, default=20)
    parser.add_argument('--size', type=int, default=32, help='image side in pixels')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--overwrite', action='store_true', help='regenerate even if an identical set exists')


def run(args: argparse.Namespace) -> int:
    """Generate the set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: bad sizes or counts, or ``--out`` holding other files (naming the folder).
    """
    res = run_generator('demo_gan', generate, args.out, args.num_per_class_train, args.num_per_class_val, args.size,
                        args.seed, args.overwrite)
    for split in SPLITS:
        print(f'  {split}: {res["num_images"][split]} images in {len(CLASSES)} class folders -> '
              f'{res["folders"][split]}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the set and print what was written (or that an identical set was reused)."""
    return generator_main('python -m gan.demo_data', __doc__.split('\n')[0], add_arguments, run, argv)


if __name__ == '__main__':
    raise SystemExit(main())
