"""Embedded demo video set: one coloured shape moving on a noisy background, 8 motion classes (generated offline).

Why: the video task's demo, end-to-end test and benchmark need short clips that exist without a download and
that only a temporal model can classify: every class shows the same kind of shape, and a single frame cannot
tell ``left`` from ``right`` or ``grow`` from ``shrink``. Each clip draws one convex polygon (3-5 jittered
vertices, random colour chosen against the background, random start position, size, speed and orientation)
on a background from ``oars.data.demo_shapes`` (gradient, stripes, smooth noise) plus fresh pixel noise per
frame, and moves it by its class: translate left/right/up/down, rotate clockwise/counter-clockwise (as seen on
screen), grow or shrink. Clips are H.264 (libx264 through PyAV; mpeg4 where libx264 is missing).

Also writes YouTube-8M-style frame features of the same clips for the feature models: per frame ``rgb``
(1024-d: a fixed random projection of the 8x8 grey frame, its temporal difference and its motion energy
``(dI/dx * dI/dt, dI/dy * dI/dt)`` per cell) and ``audio`` (128-d: noise plus a weak class direction), both
quantised to uint8 over [-2, 2] as YouTube-8M stores them (``quantize``; the video task's ``LoadFeatures``
dequantises them).

Layout written under ``out_dir``::

    videos/{train,val}/NNNNN.mp4               clips (H.264, yuv420p)
    train_list.txt, val_list.txt               ``videos/train/NNNNN.mp4 label`` (paths relative to out_dir)
    features/{train,val}/NNNNN.npz             ``rgb`` uint8 [T, 1024], ``audio`` uint8 [T, 128]
    features_train_list.txt, features_val_list.txt
    classes.txt                                one class name per line, line k = label k
    meta.json                                  generation parameters; a matching file skips regeneration

Every clip comes from its own generator seeded with ``(seed, split, index)`` and its class is ``index % 8``, so a
set is reproducible byte for byte and a clip does not depend on how many others were asked for.

Run ``python -m video.demo_data --out data/demo_videos`` to write it.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from oars.data.demo_shapes import _background, _pick_colour
from oars.data.generated_set import GeneratedSet, check_int_arg, count_files, generator_main, run_generator
from oars_deploy.streams.writer import VideoWriter
from oars_deploy.streams.writer import available_codec as runtime_available_codec

CLASSES: tuple[str, ...] = ('left', 'right', 'up', 'down', 'rotate_cw', 'rotate_ccw', 'grow', 'shrink')
SPLITS: tuple[str, ...] = ('train', 'val')
FORMAT_VERSION = 2  # 2: twice the motion per frame (version 1's was too slight for TSM to learn in minutes)
RGB_DIM, AUDIO_DIM = 1024, 128
# the writer's name in meta.json since the first version (the module lived in oars.data): kept, so that sets
# written before the move are still recognised and reused
_GENERATOR_NAME = 'oars.data.demo_videos'
_FEATURE_SEED = 20240611  # the fixed projection (the same for every set, so features of two sets are comparable)
_SHIFT, _SCALE = 4, 16.0  # sub-pixel polygon drawing (4 fractional bits)


def available_codec() -> str:
    """``'libx264'`` when PyAV's FFmpeg has it, else ``'mpeg4'`` (every FFmpeg build has that one)."""
    return runtime_available_codec()


def write_video(path: str | Path, frames: Sequence[np.ndarray] | np.ndarray, fps: int = 8, codec: str | None = None,
                gop: int = 8, crf: int = 18, faststart: bool = False) -> str:
    """Encode BGR uint8 frames (each HxWx3, H and W even) to ``path`` (MP4) with PyAV; returns the codec used.

    Args:
        path: output file (its folder must exist).
        frames: T arrays HxWx3 uint8, BGR.
        fps: frame rate written in the container.
        codec: ``'libx264'`` or ``'mpeg4'``; None picks ``available_codec()``.
        gop: keyframe interval (frames); small values make seeking cheap, which tests rely on.
        crf: libx264 quality (lower is closer to the input).
        faststart: put the index (moov atom) before the frames, as streaming sites do.

    The runtime's frame-by-frame writer (:class:`oars_deploy.streams.VideoWriter`, also the stream predictor's)
    with one encoding thread and fixed options, so the same frames give the same bytes.
    """
    frames = list(frames)
    if not frames:
        raise ValueError(f'write_video({path}): no frames')
    h, w = frames[0].shape[:2]
    for img in frames:
        if img.shape[:2] != (h, w) or img.dtype != np.uint8 or h % 2 or w % 2:
            raise ValueError(f'write_video({path}): every frame must be {h}x{w}x3 uint8 with even sizes, got '
                             f'{img.shape} {img.dtype}')
    with VideoWriter(path, fps, codec=codec, gop=gop, crf=crf, faststart=faststart) as writer:
        for img in frames:
            writer.write(img)
    return writer.codec


def quantize(features: np.ndarray, min_quantized_value: float = -2.0, max_quantized_value: float = 2.0) -> np.ndarray:
    """Float features -> uint8 as YouTube-8M stores them: the inverse of its ``Dequantize``
    (``q * range / 255 + range / 512 + min``), values outside the range clipped.

    Args:
        features: float array of any shape.

    Returns:
        uint8 array of the same shape.
    """
    span = max_quantized_value - min_quantized_value
    bias = span / 512.0 + min_quantized_value
    q = np.rint((np.asarray(features, dtype=np.float64) - bias) * (255.0 / span))
    return np.clip(q, 0, 255).astype(np.uint8)


def _polygon(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Vertex angles (radians) and radii (unit circumradius) of a convex polygon with 3-5 jittered vertices."""
    n = int(rng.integers(3, 6))
    angles = np.sort(rng.uniform(0.0, 2 * np.pi) + np.arange(n) * (2 * np.pi / n) + rng.uniform(-0.25, 0.25, n))
    return angles, rng.uniform(0.85, 1.1, n)


def _trajectory(rng: np.random.Generator, cls: int, size: int, num_frames: int) -> tuple[np.ndarray, ...]:
    """Per-frame centre [T, 2] (x, y), circumradius [T] and rotation [T] (radians, image y axis down)."""
    t = np.arange(num_frames, dtype=np.float64)
    name = CLASSES[cls]
    radius0 = rng.uniform(0.12, 0.2) * size
    centre = np.empty((num_frames, 2))
    radius = np.full(num_frames, radius0)
    rotation = np.full(num_frames, rng.uniform(0.0, 2 * np.pi))
    margin = 0.6 * radius0
    # Motion per frame is large on purpose (2-3 px, 0.2-0.3 rad, 8-10 % growth): between two of TSM's 8 segments
    # the shape moves by about one feature-map cell of ResNet's stride-4 stage. With half of it, a TSM trained from
    # scratch stayed at chance for 600 steps; with this it is above 80 % top-1 after 750.
    if name in ('left', 'right', 'up', 'down'):
        speed = rng.uniform(2.0, 3.0) * size / 64.0
        travel = speed * (num_frames - 1)
        axis = 0 if name in ('left', 'right') else 1
        sign = 1.0 if name in ('right', 'down') else -1.0
        lo, hi = margin, size - margin
        start = rng.uniform(lo + travel, max(lo + travel, hi)) if sign < 0 else rng.uniform(lo, max(lo, hi - travel))
        centre[:, axis] = start + sign * speed * t
        centre[:, 1 - axis] = rng.uniform(margin + 0.1 * size, size - margin - 0.1 * size)
    else:
        lo, hi = 0.3 * size, 0.7 * size
        centre[:] = rng.uniform(lo, hi, 2)
        if name.startswith('rotate'):
            # y points down in images, so a growing angle turns clockwise on screen
            step = rng.uniform(0.2, 0.3) * (1.0 if name == 'rotate_cw' else -1.0)
            rotation = rotation + step * t
        else:
            rate = rng.uniform(0.08, 0.1) * (1.0 if name == 'grow' else -1.0)
            radius0 = rng.uniform(0.08, 0.11) * size if name == 'grow' else rng.uniform(0.24, 0.3) * size
            radius = radius0 * np.exp(rate * t)
    return centre, radius, rotation


def render_clip(rng: np.random.Generator, cls: int, size: int = 64, num_frames: int = 16) -> np.ndarray:
    """One clip of class ``cls``: uint8 [T, size, size, 3], BGR."""
    background = _background(rng, size)
    angles, radii = _polygon(rng)
    centre, radius, rotation = _trajectory(rng, cls, size, num_frames)
    mask0 = np.zeros((size, size), np.uint8)
    _draw(mask0, centre[0], radius[0], rotation[0], angles, radii)
    under = background[mask0.astype(bool)] if mask0.any() else background.reshape(-1, 3)
    colour = _pick_colour(rng, under.mean(axis=0))
    noise_sigma = rng.uniform(3.0, 8.0)
    clip = np.empty((num_frames, size, size, 3), np.uint8)
    for k in range(num_frames):
        mask = np.zeros((size, size), np.uint8)
        _draw(mask, centre[k], radius[k], rotation[k], angles, radii)
        img = np.where(mask[..., None].astype(bool), colour[None, None, :], background)
        img = img + rng.normal(0.0, noise_sigma, img.shape).astype(np.float32)
        clip[k] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return clip


def _draw(mask: np.ndarray, centre: np.ndarray, radius: float, rotation: float, angles: np.ndarray,
          radii: np.ndarray) -> None:
    a = angles + rotation
    pts = centre[None, :] + radius * radii[:, None] * np.stack([np.cos(a), np.sin(a)], axis=1)
    cv2.fillConvexPoly(mask, np.round(pts * _SCALE).astype(np.int32), 1, shift=_SHIFT)


@functools.lru_cache(maxsize=1)
def _projections() -> tuple[np.ndarray, np.ndarray]:
    """The fixed feature projection [4 * 64, 1024] and the audio class directions [8, 128] (float32)."""
    rng = np.random.default_rng(_FEATURE_SEED)
    proj = rng.normal(0.0, 1.0, (4 * 64, RGB_DIM)).astype(np.float32)
    proj /= np.linalg.norm(proj, axis=0, keepdims=True)
    audio = rng.normal(0.0, 1.0, (len(CLASSES), AUDIO_DIM)).astype(np.float32)
    audio /= np.linalg.norm(audio, axis=1, keepdims=True) / np.sqrt(AUDIO_DIM)  # unit RMS per entry
    return proj, audio


def clip_features(clip: np.ndarray, cls: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """YouTube-8M-style per-frame features of one clip, quantised: {'rgb': uint8 [T, 1024], 'audio': [T, 128]}.

    rgb: the 8x8 grey frame, its temporal difference (0 for the first frame) and the motion energy
    ``Ix * It``, ``Iy * It`` per cell (each standardised over the clip), projected by a fixed random matrix
    and scaled to ~0.6 RMS; audio: N(0, 0.6) noise per frame, an N(0, 0.3) offset per clip and 0.07 times the
    class direction (unit RMS): weak (a linear probe on time-averaged audio: 49% of the 80 validation clips; on
    mean+std-pooled rgb: 59%; chance 12.5%).
    """
    proj, audio_dirs = _projections()
    grey = np.stack([cv2.resize(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), (8, 8), interpolation=cv2.INTER_AREA)
                     for f in clip]).astype(np.float32) / 255.0  # [T, 8, 8]
    it = np.diff(grey, axis=0, prepend=grey[:1])
    iy, ix = np.gradient(grey, axis=(1, 2))
    parts = [grey - grey.mean(), it, ix * it, iy * it]
    parts = [p.reshape(len(clip), -1) / (p.std() + 1e-6) for p in parts]
    rgb = np.concatenate(parts, axis=1) @ proj  # [T, 1024], ~N(0, 1) per entry
    rgb *= 0.6 / (rgb.std() + 1e-6)
    clip_offset = rng.normal(0.0, 0.3, AUDIO_DIM).astype(np.float32)  # does not average out over frames
    audio = rng.normal(0.0, 0.6, (len(clip), AUDIO_DIM)).astype(np.float32) + clip_offset + 0.07 * audio_dirs[cls]
    return {'rgb': quantize(rgb), 'audio': quantize(audio)}


def _write_split(root: Path, split: str, num: int, size: int, num_frames: int, seed: int, codec: str) -> None:
    vid_dir, feat_dir = root / 'videos' / split, root / 'features' / split
    vid_dir.mkdir(parents=True, exist_ok=True)
    feat_dir.mkdir(parents=True, exist_ok=True)
    lines, feat_lines = [], []
    for idx in range(num):
        cls = idx % len(CLASSES)
        rng = np.random.default_rng([seed, SPLITS.index(split), idx])
        clip = render_clip(rng, cls, size, num_frames)
        name = f'{idx:05d}'
        write_video(vid_dir / f'{name}.mp4', clip, codec=codec)
        np.savez(feat_dir / f'{name}.npz', **clip_features(clip, cls, rng))
        lines.append(f'videos/{split}/{name}.mp4 {cls}\n')
        feat_lines.append(f'features/{split}/{name}.npz {cls}\n')
    (root / f'{split}_list.txt').write_text(''.join(lines))
    (root / f'features_{split}_list.txt').write_text(''.join(feat_lines))


def _owned_paths(root: Path) -> list[Path]:
    """Everything generate() writes besides meta.json; the only paths it ever deletes."""
    paths = [root / 'classes.txt']
    for split in SPLITS:
        paths += [root / 'videos' / split, root / 'features' / split, root / f'{split}_list.txt',
                  root / f'features_{split}_list.txt']
    return paths


def _is_complete(root: Path, params: dict) -> bool:
    return all(count_files(root / folder / split, pattern) == params[f'num_{split}']
               for split in SPLITS for folder, pattern in (('videos', '*.mp4'), ('features', '*.npz')))


def _result(root: Path, params: dict, codec: str, skipped: bool) -> dict:
    return {
        'out_dir': str(root),
        'skipped': skipped,
        'classes': list(CLASSES),
        'codec': codec,
        'num_clips': {s: params[f'num_{s}'] for s in SPLITS},
        'lists': {s: str(root / f'{s}_list.txt') for s in SPLITS},
        'feature_lists': {s: str(root / f'features_{s}_list.txt') for s in SPLITS},
        'classes_file': str(root / 'classes.txt'),
        'meta': str(root / 'meta.json'),
    }


def generate(
    out_dir: str | Path,
    num_train: int = 240,
    num_val: int = 80,
    size: int = 64,
    num_frames: int = 16,
    seed: int = 0,
    overwrite: bool = False,
) -> dict:
    """Write the demo video set under ``out_dir`` unless a complete set with the same parameters is there.

    Returns a dict with ``out_dir``, ``skipped`` (True when the existing set was reused), ``classes``, ``codec``,
    ``num_clips`` per split and the ``lists`` / ``feature_lists`` / ``classes_file`` paths. A set written earlier by
    this generator with other parameters is replaced; a non-empty ``out_dir`` that this generator did not write is
    refused unless ``overwrite=True`` (and even then only the paths it writes are removed).
    """
    owner = 'demo_videos.generate'
    for key, value, low in (('num_train', num_train, 0), ('num_val', num_val, 0), ('size', size, 32),
                            ('num_frames', num_frames, 2)):
        check_int_arg(owner, key, value, low)
    if size % 2:
        raise ValueError(f'{owner}: size must be even (yuv420p), got {size}')
    if num_train + num_val == 0:
        raise ValueError(f'{owner}: num_train and num_val are both 0; nothing to generate')
    check_int_arg(owner, 'seed', seed, 0)
    root = Path(out_dir)
    params = {'num_train': int(num_train), 'num_val': int(num_val), 'size': int(size),
              'num_frames': int(num_frames), 'seed': int(seed)}
    codec = available_codec()
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        'videos/, features/, the list files, classes.txt and meta.json')
    if not overwrite and gset.reusable_meta(codec=codec) is not None and _is_complete(root, params):
        return _result(root, params, codec, skipped=True)
    gset.begin(overwrite, codec=codec, classes=list(CLASSES))
    (root / 'classes.txt').write_text(''.join(f'{c}\n' for c in CLASSES))
    for split in SPLITS:
        _write_split(root, split, params[f'num_{split}'], size, num_frames, seed, codec)
    gset.finish()
    return _result(root, params, codec, skipped=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m video.demo_data`` and ``tools/demo_data.py``)."""
    parser.add_argument('--out', default='data/demo_videos', help='output root (default: data/demo_videos)')
    parser.add_argument('--num-train', type=int, default=240)
    parser.add_argument('--num-val', type=int, default=80)
    parser.add_argument('--size', type=int, default=64, help='frame side in pixels (even)')
    parser.add_argument('--num-frames', type=int, default=16)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--overwrite', action='store_true', help='regenerate even if an identical set exists')


def run(args: argparse.Namespace) -> int:
    """Generate the set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: bad sizes or counts, or ``--out`` holding other files (naming the folder).
    """
    res = run_generator('demo_videos', generate, args.out, args.num_train, args.num_val, args.size, args.num_frames,
                        args.seed, args.overwrite, codec_key='codec')
    for split in SPLITS:
        print(f'  {split}: {res["num_clips"][split]} clips -> {res["lists"][split]}, features -> '
              f'{res["feature_lists"][split]}')
    print(f'  classes ({res["classes_file"]}): {", ".join(CLASSES)}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the set and print what was written (or that an identical set was reused)."""
    return generator_main('python -m video.demo_data', __doc__.split('\n')[0], add_arguments, run, argv)


if __name__ == '__main__':
    raise SystemExit(main())
