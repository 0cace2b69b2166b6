"""Label PNGs without PIL (oars_deploy.draw.label_png): the bytes PIL wrote before, the class ids read back."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from oars_deploy.draw import get_palette, save_label_png


def _pil_bytes(label: np.ndarray, palette: np.ndarray) -> bytes:
    """What save_label_png wrote with PIL before (the reference implementation, kept here only)."""
    flat = np.zeros((256, 3), dtype=np.uint8)
    flat[: len(palette)] = palette
    flat[255] = (255, 255, 255)
    img = Image.fromarray(label.astype(np.uint8), mode="P")
    img.putpalette(flat.reshape(-1).tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _blocks(shape: tuple[int, int], classes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, classes, (max(1, shape[0] // 16), max(1, shape[1] // 16))).astype(np.uint8)
    return cv2.resize(small, shape[::-1], interpolation=cv2.INTER_NEAREST)


@pytest.mark.parametrize("shape,classes,noise", [((1, 1), 2, False), ((3, 2000), 4, True), ((97, 130), 4, True),
                                                 ((512, 640), 21, False), ((1000, 700), 4, True)],
                         ids=["1x1", "3x2000", "odd", "blocks", "multi-idat"])
def test_same_bytes_as_pil_and_ids_read_back(tmp_path, shape, classes, noise):
    rng = np.random.default_rng(0)
    label = rng.integers(0, classes, shape).astype(np.int64) if noise else _blocks(shape, classes, 1).astype(np.int64)
    label[0, 0] = 255  # ignore id
    palette = get_palette(classes)
    path = tmp_path / "label.png"
    save_label_png(label, palette, path)
    assert path.read_bytes() == _pil_bytes(label, palette)  # 1000x700 noise: several 64 KiB IDAT chunks
    with Image.open(path) as im:
        assert im.mode == "P"
        np.testing.assert_array_equal(np.asarray(im), label)
        assert im.getpalette()[: 3 * classes] == palette.reshape(-1).tolist()
    colours = cv2.imread(str(path), cv2.IMREAD_COLOR)  # viewers (and OpenCV) see the class colours
    np.testing.assert_array_equal(colours[1:, 1:], palette[label[1:, 1:]][..., ::-1])
    np.testing.assert_array_equal(colours[0, 0], [255, 255, 255])


def test_bad_labels_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"class ids must be in \[0, 255\].*\[0, 300\]"):
        save_label_png(np.array([[0, 300]]), get_palette(2), tmp_path / "a.png")
    with pytest.raises(ValueError, match="must be an \\[H, W\\] integer array"):
        save_label_png(np.zeros((2, 2, 3), np.uint8), get_palette(2), tmp_path / "b.png")
    with pytest.raises(ValueError, match="integer array"):
        save_label_png(np.zeros((2, 2), np.float32), get_palette(2), tmp_path / "c.png")
    assert list(tmp_path.iterdir()) == []
