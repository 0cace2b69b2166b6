"""The header size reader (oars_deploy.image_header) against Pillow and OpenCV on real small files, on crafted bombs
(tiny files declaring 20000 x 20000 pixels) and on truncated / unknown bytes; and the runtime's file reading
refusing a bomb before OpenCV is called."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from oars_deploy.errors import DeployError
from oars_deploy.image_header import ImageHeaderError, file_image_header, image_header
from oars_deploy.outputs import read_image

BOMB = 20000


def png_bytes(width: int, height: int) -> bytes:
    """A valid PNG (real CRCs) declaring ``width`` x ``height`` grey pixels whose IDAT holds only a few rows."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = zlib.compress(b"\0" * (width + 1) * 4, 9)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def jpeg_bytes(width: int, height: int) -> bytes:
    """A JPEG header: SOI, a big APP1 and a DHT segment (both skipped by the walk), then SOF2 with the size."""
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 5000) + b"Exif\0" + b"\xff" * 4995  # 0xFF bytes inside a segment
    dht = b"\xff\xc4" + struct.pack(">H", 2 + 17) + bytes(17)
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app1 + b"\xff\xff" + dht + sof + b"\xff\xda\x00\x02\xff\xd9"


def bmp_bytes(width: int, height: int) -> bytes:
    return b"BM" + bytes(12) + struct.pack("<Iii", 40, width, -height) + bytes(28)


def gif_bytes(width: int, height: int) -> bytes:
    return (b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80, 0, 0) + bytes(6)
            + b"\x21\xf9\x04\x00\x00\x00\x00\x00" + b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0))


def webp_bytes(width: int, height: int, kind: str) -> bytes:
    if kind == "VP8X":
        body = b"VP8X" + struct.pack("<I", 10) + bytes(4) + (width - 1).to_bytes(3, "little") + (
            height - 1).to_bytes(3, "little")
    elif kind == "VP8L":
        bits = (width - 1) | ((height - 1) << 14)
        body = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + struct.pack("<I", bits)
    else:
        body = b"VP8 " + struct.pack("<I", 10) + b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", width, height)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def tiff_bytes(width: int, height: int, order: str = "<", big: bool = False) -> bytes:
    """A TIFF (or BigTIFF) whose first IFD gives the size (width SHORT when it fits, height LONG)."""
    if big:
        head = (b"II" if order == "<" else b"MM") + struct.pack(order + "HHHQ", 43, 8, 0, 16)
        entries = struct.pack(order + "HHQQ", 256, 16, 1, width) + struct.pack(order + "HHQQ", 257, 16, 1, height)
        return head + struct.pack(order + "Q", 2) + entries + bytes(8)
    head = (b"II" if order == "<" else b"MM") + struct.pack(order + "HI", 42, 8)
    width_entry = struct.pack(order + "HHIH", 256, 3, 1, width) + b"\0\0" if width < 65536 else struct.pack(
        order + "HHII", 256, 4, 1, width)
    return head + struct.pack(order + "H", 2) + width_entry + struct.pack(order + "HHII", 257, 4, 1, height) + bytes(4)


CRAFTED = {
    "PNG": png_bytes, "JPEG": jpeg_bytes, "BMP": bmp_bytes, "GIF": gif_bytes,
    "WebP-VP8": lambda w, h: webp_bytes(w, h, "VP8"), "WebP-VP8L": lambda w, h: webp_bytes(w, h, "VP8L"),
    "WebP-VP8X": lambda w, h: webp_bytes(w, h, "VP8X"), "TIFF-II": tiff_bytes,
    "TIFF-MM": lambda w, h: tiff_bytes(w, h, ">"), "BigTIFF": lambda w, h: tiff_bytes(w, h, ">", big=True),
    "PPM": lambda w, h: f"P6\n# a comment\n{w} {h}\n255\n".encode(),
    "PAM": lambda w, h: f"P7\nWIDTH {w}\nHEIGHT {h}\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n".encode(),
    "PFM": lambda w, h: f"PF\n{w} {h}\n-1.0\n".encode(),
    "Sun raster": lambda w, h: b"\x59\xa6\x6a\x95" + struct.pack(">IIII", w, h, 24, 0),
    "HDR": lambda w, h: f"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y {h} +X {w}\n".encode(),
    "J2K": lambda w, h: b"\xff\x4f\xff\x51" + struct.pack(">HHIIII", 41, 0, w, h, 0, 0),
    "AVIF": lambda w, h: (struct.pack(">I", 20) + b"ftypavif" + bytes(4) + b"mif1"
                          + struct.pack(">I", 48) + b"meta" + bytes(4)
                          + struct.pack(">I", 36) + b"iprp" + struct.pack(">I", 28) + b"ipco"
                          + struct.pack(">I", 20) + b"ispe" + bytes(4) + struct.pack(">II", w, h)),
}


@pytest.mark.parametrize("kind", sorted(CRAFTED))
def test_crafted_headers_declare_their_size(kind):
    size = (16383, 16380) if kind in ("WebP-VP8", "WebP-VP8L") else (BOMB, BOMB + 7)  # VP8 sizes have 14 bits
    header = image_header(CRAFTED[kind](*size))
    assert (header.width, header.height) == size
    assert image_header(CRAFTED[kind](31, 17)).pixels == 31 * 17  # the good case: a small image


def test_crafted_png_bomb_is_a_valid_small_png():
    data = png_bytes(BOMB, BOMB)
    assert len(data) < 1000
    with pytest.raises(Image.DecompressionBombError):  # Pillow declines to even read its header
        Image.open(io.BytesIO(data))


@pytest.mark.parametrize("ext,fmt,mode,kwargs", [
    (".png", "PNG", "RGB", {}), (".png", "PNG", "P", {}), (".jpg", "JPEG", "RGB", {"exif": b"Exif\0\0MM\0*"}),
    (".jpg", "JPEG", "RGB", {"progressive": True}), (".bmp", "BMP", "RGB", {}), (".gif", "GIF", "P", {}),
    (".webp", "WEBP", "RGB", {}), (".webp", "WEBP", "RGBA", {"lossless": True}), (".tif", "TIFF", "RGB", {}),
    (".tif", "TIFF", "RGB", {"compression": "tiff_lzw"}), (".ppm", "PPM", "RGB", {}), (".jp2", "JPEG2000", "RGB", {}),
    (".j2k", "JPEG2000", "RGB", {})])
def test_header_size_equals_pillow_and_opencv(tmp_path, ext, fmt, mode, kwargs):
    img = np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    path = str(tmp_path / f"a{ext}")
    Image.fromarray(img).convert(mode).save(path, fmt, **kwargs)
    header = file_image_header(path)
    assert (header.width, header.height) == Image.open(path).size == (53, 37)
    assert cv2.imread(path, cv2.IMREAD_COLOR).shape[:2] == (37, 53)


@pytest.mark.parametrize("ext", [".png", ".jpg", ".bmp", ".tif", ".webp", ".ppm", ".pgm", ".pfm", ".ras", ".hdr",
                                 ".jp2", ".avif", ".gif", ".pam"])
def test_header_size_equals_opencv_on_files_opencv_writes(tmp_path, ext):
    img = np.random.default_rng(1).integers(0, 256, (29, 41, 3), dtype=np.uint8)
    src = img.astype(np.float32) / 255 if ext in (".pfm", ".hdr") else (img[:, :, 0] if ext == ".pgm" else img)
    path = str(tmp_path / f"a{ext}")
    try:
        if not cv2.imwrite(path, src):
            pytest.skip(f"this OpenCV does not write {ext}")
    except cv2.error:
        pytest.skip(f"this OpenCV does not write {ext}")
    header = file_image_header(path)
    assert (header.height, header.width) == cv2.imread(path, cv2.IMREAD_COLOR).shape[:2] == (29, 41)


@pytest.mark.parametrize("data,fmt", [
    (b"this is text, not a picture", None), (b"", None), (b"\x89PNG\r\n\x1a\n\0\0", "PNG"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "JPEG"), (b"\xff\xd8\xff\xda\x00\x02", "JPEG"), (b"BM\0\0", "BMP"),
    (b"II*\0\xff\xff\xff\x7f", "TIFF"), (b"RIFF\0\0\0\0WEBPXXXX", "WebP"), (b"P6\nabc def\n", "PNM")])
def test_unknown_or_truncated_bytes_are_refused_with_the_format(data, fmt):
    with pytest.raises(ImageHeaderError) as err:
        image_header(data)
    assert err.value.format == fmt
    assert (fmt or "not the header of an image format") in str(err.value)


def test_read_image_refuses_a_bomb_before_opencv(tmp_path, monkeypatch):
    bomb, good = tmp_path / "bomb.png", tmp_path / "good.png"
    bomb.write_bytes(png_bytes(BOMB, BOMB))
    cv2.imwrite(str(good), np.zeros((20, 30, 3), np.uint8))

    def no_decode(*args, **kwargs):
        raise AssertionError("cv2.imread called")

    monkeypatch.setattr(cv2, "imread", no_decode)
    with pytest.raises(DeployError, match=rf"bomb.png: image of {BOMB}x{BOMB} = 400000000 pixels \(declared in its "
                                          r"PNG header\) exceeds the limit of 200000000 pixels"):
        read_image(str(bomb))
    with pytest.raises(DeployError, match="good.png: image of 30x20 = 600 pixels .* limit of 100 pixels"):
        read_image(str(good), max_pixels=100)
    monkeypatch.undo()
    assert read_image(str(good)).shape == (20, 30, 3)
    (tmp_path / "cut.png").write_bytes(png_bytes(30, 20)[:12])
    with pytest.raises(DeployError, match=r"could not read image \(unsupported or corrupt file\): .*cut.png \(its PNG"
                                          r" header is truncated\)"):
        read_image(str(tmp_path / "cut.png"))
