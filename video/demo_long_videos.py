"""Embedded demo set for temporal action localisation: long videos of a static scene with 1-3 timed actions.

Why: BMN's demo, end-to-end test and benchmarks need untrimmed videos whose segments are known, without a
download. Each video is a static textured scene (``oars.data.demo_shapes``'s backgrounds) with fresh pixel noise
per frame; at 1-3 random, non-overlapping times a shape appears and moves by one of the motion classes of
:mod:`video.demo_data` (the same trajectories, so the demo recognizer trained on those clips responds to them), and
is gone between actions. Videos are H.264 through PyAV (:func:`video.demo_data.write_video`).

Every video's frame count is a multiple of ``SNIPPET_FRAMES`` (8, the demo recognizer's default snippet), so
``tools/extract_features.py``'s snippets cover the whole video and its features span exactly ``duration_second``.

Layout written under ``out_dir``::

    videos/train_NNNNN.mp4, videos/val_NNNNN.mp4   all videos in one folder (one extraction run)
    annotations.json                               ActivityNet v1.3: {"version", "taxonomy", "database": {id:
                                                   {"duration_second", "subset": training|validation, "fps",
                                                   "url": "videos/<id>.mp4", "annotations": [{"segment",
                                                   "label"}]}}}
    classes.txt                                    the motion classes, line k = label k
    meta.json                                      generation parameters; a matching file skips regeneration
    features/                                      not written here: tools/extract_features.py's output, removed
                                                   when the set is regenerated (stale features never survive)

Every video comes from its own generator seeded with ``(seed, split, index)``, so a set is reproducible byte for
byte and a video does not depend on how many others were asked for.

Run ``tools/demo_data.py long-videos --out data/demo_long_videos`` (or ``python -m video.demo_long_videos``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from oars.data.demo_shapes import _background, _pick_colour
from oars.data.generated_set import GeneratedSet, check_int_arg, count_files, generator_main, run_generator
from video.demo_data import CLASSES, _draw, _polygon, _trajectory, available_codec, write_video

SUBSETS: dict[str, str] = {'train': 'training', 'val': 'validation'}
FORMAT_VERSION = 1
FPS = 8
SNIPPET_FRAMES = 8
ACTION_FRAMES = (12, 24)  # 1.5-3 s: longer translations leave the frame, longer growth fills it
_GENERATOR_NAME = 'video.demo_long_videos'


def plan_actions(rng: np.random.Generator, num_frames: int, max_actions: int = 3) -> list[tuple[int, int, int]]:
    """1..``max_actions`` non-overlapping actions in a video of ``num_frames`` frames, at least 4 frames apart.

    Returns:
        sorted ``(start_frame, end_frame_exclusive, class_id)`` triples.
    """
    count = int(rng.integers(1, max_actions + 1))
    lengths = rng.integers(ACTION_FRAMES[0], ACTION_FRAMES[1] + 1, count)
    free = num_frames - int(lengths.sum()) - 4 * (count + 1)
    while free < 0 and count > 1:  # a short video: fewer actions
        count -= 1
        lengths = lengths[:count]
        free = num_frames - int(lengths.sum()) - 4 * (count + 1)
    if free < 0:
        raise ValueError(f'a {num_frames}-frame video cannot hold a {int(lengths[0])}-frame action')
    # split the free frames into count + 1 gaps (uniform over compositions)
    cuts = np.sort(rng.integers(0, free + 1, count))
    gaps = np.diff(np.concatenate([[0], cuts, [free]])) + 4
    out, t = [], 0
    for k in range(count):
        t += int(gaps[k])
        out.append((t, t + int(lengths[k]), int(rng.integers(0, len(CLASSES)))))
        t += int(lengths[k])
    return out


def render_video(rng: np.random.Generator, num_frames: int, size: int,
                 actions: list[tuple[int, int, int]]) -> np.ndarray:
    """The frames of one video: uint8 [T, size, size, 3] BGR, the shape drawn only during ``actions``."""
    background = _background(rng, size)
    noise_sigma = rng.uniform(3.0, 6.0)
    layer = np.broadcast_to(background, (num_frames, size, size, 3)).copy()
    for start, end, cls in actions:
        angles, radii = _polygon(rng)
        centre, radius, rotation = _trajectory(rng, cls, size, end - start)
        colour = _pick_colour(rng, background.reshape(-1, 3).mean(axis=0))
        for k in range(end - start):
            mask = np.zeros((size, size), np.uint8)
            _draw(mask, centre[k], radius[k], rotation[k], angles, radii)
            layer[start + k][mask.astype(bool)] = colour
    noisy = layer + rng.normal(0.0, noise_sigma, layer.shape).astype(np.float32)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def _owned_paths(root: Path) -> list[Path]:
    return [root / 'videos', root / 'annotations.json', root / 'classes.txt', root / 'features']


def generate(out_dir: str | Path, num_train: int = 48, num_val: int = 16, size: int = 64, min_seconds: int = 16,
             max_seconds: int = 32, seed: int = 0, overwrite: bool = False) -> dict:
    """Write the long-video set under ``out_dir`` unless a complete set with the same parameters is there.

    Args:
        num_train / num_val: videos per subset (``training`` / ``validation`` in the JSON).
        size: frame side in pixels (even). min_seconds / max_seconds: video length range at 8 fps.
        seed: the set's seed. overwrite: replace a non-empty folder this generator did not write (its owned
            paths only).

    Returns:
        ``out_dir``, ``skipped`` (an identical set was reused), ``codec``, ``num_videos`` per split,
        ``num_actions``, ``annotations`` (the JSON's path), ``videos`` (the folder), ``classes_file``.

    Raises:
        ValueError: bad counts or sizes. FileExistsError: a foreign non-empty ``out_dir`` without ``overwrite``.
    """
    owner = 'demo_long_videos.generate'
    for key, value, low in (('num_train', num_train, 0), ('num_val', num_val, 0), ('size', size, 32),
                            ('min_seconds', min_seconds, 4), ('max_seconds', max_seconds, 4), ('seed', seed, 0)):
        check_int_arg(owner, key, value, low)
    if size % 2:
        raise ValueError(f'{owner}: size must be even (yuv420p), got {size}')
    if max_seconds < min_seconds:
        raise ValueError(f'{owner}: max_seconds ({max_seconds}) < min_seconds ({min_seconds})')
    if num_train + num_val == 0:
        raise ValueError(f'{owner}: num_train and num_val are both 0; nothing to generate')
    root = Path(out_dir)
    params = {'num_train': int(num_train), 'num_val': int(num_val), 'size': int(size),
              'min_seconds': int(min_seconds), 'max_seconds': int(max_seconds), 'seed': int(seed), 'fps': FPS}
    codec = available_codec()
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        'videos/, features/, annotations.json, classes.txt and meta.json')
    total = int(num_train) + int(num_val)
    if not overwrite and gset.reusable_meta(codec=codec) is not None and \
            count_files(root / 'videos', '*.mp4') == total and (root / 'annotations.json').is_file():
        meta = gset.read_meta() or {}
        return _result(root, params, codec, int(meta.get('num_actions', 0)), skipped=True)
    gset.begin(overwrite, codec=codec, classes=list(CLASSES))
    (root / 'classes.txt').write_text(''.join(f'{c}\n' for c in CLASSES))
    (root / 'videos').mkdir()
    database, num_actions = {}, 0
    for split, subset in SUBSETS.items():
        for idx in range(params[f'num_{split}']):
            rng = np.random.default_rng([seed, list(SUBSETS).index(split), idx])
            seconds = int(rng.integers(min_seconds, max_seconds + 1))
            num_frames = seconds * FPS - (seconds * FPS) % SNIPPET_FRAMES
            actions = plan_actions(rng, num_frames)
            vid = f'{split}_{idx:05d}'
            write_video(root / 'videos' / f'{vid}.mp4', render_video(rng, num_frames, size, actions), fps=FPS,
                        codec=codec)
            database[vid] = {'duration_second': num_frames / FPS, 'subset': subset, 'fps': FPS,
                             'url': f'videos/{vid}.mp4',
                             'annotations': [{'segment': [s / FPS, e / FPS], 'label': CLASSES[c]}
                                             for s, e, c in actions]}
            num_actions += len(actions)
    doc = {'version': 'VERSION 1.3', 'taxonomy': [{'nodeName': c, 'nodeId': i, 'parentId': None,
                                                   'parentName': None} for i, c in enumerate(CLASSES)],
           'database': database}
    (root / 'annotations.json').write_text(json.dumps(doc, indent=1) + '\n')
    gset.finish(num_actions=num_actions)
    return _result(root, params, codec, num_actions, skipped=False)


def _result(root: Path, params: dict, codec: str, num_actions: int, skipped: bool) -> dict:
    return {'out_dir': str(root), 'skipped': skipped, 'codec': codec,
            'num_videos': {s: params[f'num_{s}'] for s in SUBSETS}, 'num_actions': num_actions,
            'annotations': str(root / 'annotations.json'), 'videos': str(root / 'videos'),
            'classes_file': str(root / 'classes.txt')}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m video.demo_long_videos`` and ``tools/demo_data.py long-videos``)."""
    parser.add_argument('--out', default='data/demo_long_videos', help='output root (default: data/demo_long_videos)')
    parser.add_argument('--num-train', type=int, default=48)
    parser.add_argument('--num-val', type=int, default=16)
    parser.add_argument('--size', type=int, default=64, help='frame side in pixels (even)')
    parser.add_argument('--min-seconds', type=int, default=16)
    parser.add_argument('--max-seconds', type=int, default=32)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--overwrite', action='store_true', help='regenerate even if an identical set exists')


def run(args: argparse.Namespace) -> int:
    """Generate the set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: bad sizes or counts, or ``--out`` holding other files (naming the folder).
    """
    res = run_generator('demo_long_videos', generate, args.out, args.num_train, args.num_val, args.size,
                        args.min_seconds, args.max_seconds, args.seed, args.overwrite, codec_key='codec')
    print(f'  videos: {res["videos"]} ({res["num_videos"]["train"]} training, {res["num_videos"]["val"]} '
          f'validation, {res["num_actions"]} actions); annotations: {res["annotations"]}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the set and print what was written (or that an identical set was reused)."""
    return generator_main('python -m video.demo_long_videos', __doc__.split('\n')[0], add_arguments, run, argv)


if __name__ == '__main__':
    raise SystemExit(main())
