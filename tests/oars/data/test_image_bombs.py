"""The training readers refuse an image whose header declares more pixels than any image may have (a
decompression bomb), before OpenCV or PIL allocate it: the runtime's one rule, raised as a DataError."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

from oars.data.transforms.loading import read_image, read_label_map
from oars.errors import DataError


def _png(width: int, height: int, palette: bool = False) -> bytes:
    """A valid PNG (real CRCs) declaring ``width`` x ``height`` 8-bit pixels, greyscale or palette."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 3 if palette else 0, 0, 0, 0)
    plte = chunk(b"PLTE", bytes(range(6))) if palette else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + plte + chunk(b"IDAT", zlib.compress(b"\0" * (width + 1) * 4))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("reader", [read_image, read_label_map])
def test_a_bomb_is_refused_before_decoding(tmp_path, monkeypatch, reader):
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(_png(20000, 20000, palette=reader is read_label_map))

    def no_decode(*args, **kwargs):
        raise AssertionError("decoded")

    monkeypatch.setattr(cv2, "imread", no_decode)
    monkeypatch.setattr("oars.data.transforms.loading.Image.open", no_decode)
    with pytest.raises(DataError, match=r"bomb.png: image of 20000x20000 = 400000000 pixels \(declared in its PNG "
                                        r"header\) exceeds the limit of 200000000 pixels"):
        reader(str(bomb))


def test_pillows_own_bomb_range_is_a_clear_message(tmp_path, monkeypatch):
    """Between Pillow's limit and ours PIL raises DecompressionBombError (not an OSError): one message, no
    traceback. Pillow's limit is lowered here so the file stays small."""
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    label = tmp_path / "big_label.png"
    label.write_bytes(_png(100, 100, palette=True))
    with pytest.raises(DataError, match=r"could not read label map .*big_label.png"):
        read_label_map(str(label))


def test_ordinary_files_still_read(tmp_path):
    img = np.full((20, 30, 3), 7, np.uint8)
    cv2.imwrite(str(tmp_path / "img.png"), img)
    assert (read_image(str(tmp_path / "img.png")) == img).all()
    from PIL import Image

    Image.fromarray(np.full((20, 30), 2, np.uint8), mode="L").save(tmp_path / "label.png")
    assert read_label_map(str(tmp_path / "label.png")).shape == (20, 30)
