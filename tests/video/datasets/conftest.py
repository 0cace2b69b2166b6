"""Clips whose frames carry their own index (bottom half: grey level 20 + 7 * index; top half: a texture moving one
pixel per frame, so that the encoder really predicts), as an MP4 and as a frame folder."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

NUM_FRAMES = 30
H, W = 48, 64


def index_frames(num: int = NUM_FRAMES) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    texture = cv2.resize(rng.uniform(0, 255, (8, 16 + num)).astype(np.float32), ((16 + num) * 4, 32))
    frames = []
    for i in range(num):
        img = np.empty((H, W, 3), np.uint8)
        img[:24] = np.clip(texture[:24, 4 * i:4 * i + W, None], 0, 255).astype(np.uint8)
        img[24:] = 20 + 7 * i
        frames.append(img)
    return frames


def frame_index(img: np.ndarray) -> int:
    """The index a frame of ``index_frames`` carries (robust to compression: grey levels are 7 apart)."""
    return int(round((float(img[28:44, 8:56].mean()) - 20.0) / 7.0))


@pytest.fixture(scope='session')
def index_clip(tmp_path_factory) -> str:
    """30 frames, H.264 (keyframe every 5 frames, B-frames), 48x64."""
    from video.demo_data import write_video

    path = tmp_path_factory.mktemp('clips') / 'index.mp4'
    write_video(path, index_frames(), fps=10, gop=5)
    return str(path)


@pytest.fixture(scope='session')
def bad_files(tmp_path_factory, index_clip) -> dict[str, str]:
    """Truncated MP4s (index at the end: 40% of the bytes; index first: 60%), a text file named .mp4, an empty
    file."""
    from video.demo_data import write_video

    root = tmp_path_factory.mktemp('bad')
    data = Path(index_clip).read_bytes()
    (root / 'truncated.mp4').write_bytes(data[: int(len(data) * 0.4)])
    write_video(root / 'fast.mp4', index_frames(), fps=10, gop=5, faststart=True)
    fast = (root / 'fast.mp4').read_bytes()
    (root / 'truncated_faststart.mp4').write_bytes(fast[: int(len(fast) * 0.6)])
    (root / 'notes.mp4').write_text('this is not a video\n' * 20)
    (root / 'empty.mp4').write_bytes(b'')
    return {k: str(root / f'{k}.mp4') for k in ('truncated', 'truncated_faststart', 'notes', 'empty')}


def write_frame_folder(folder: Path, start_index: int, tmpl: str = 'img_{:05d}.png', num: int = 12) -> Path:
    """Frame files numbered from ``start_index``; file number N holds frame index N - start_index."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(index_frames(num)):
        cv2.imwrite(str(folder / tmpl.format(i + start_index)), img)
    return folder
