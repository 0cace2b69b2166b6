"""An image's width and height read from its header bytes, before anything decodes it (pure Python, no dependency).

Why: a 50 kB PNG can declare 20000 x 20000 pixels (a decompression bomb: 1.2 GB once decoded as BGR). Checking the
size after ``cv2.imdecode`` is too late, and Pillow refuses to read the header of an image above ~179 Mpx (its own
bomb guard raises), so a check that relies on Pillow is skipped exactly for the worst files. This module reads the
declared size of every format OpenCV's ``imdecode`` / ``imread`` decodes in this runtime: PNG (IHDR), JPEG (the
first SOF0-SOF15 segment, walking the segments), BMP, GIF (the logical screen and the first frame's extent), WebP
(VP8, VP8L, VP8X), TIFF and BigTIFF (first IFD, both byte orders), PBM/PGM/PPM/PAM, PFM, Sun raster, Radiance HDR,
JPEG 2000 (JP2 ``ihdr`` and the J2K ``SIZ`` marker) and AVIF (the largest ``ispe`` property). OpenEXR (disabled in
OpenCV's wheels) and GDAL rasters are not read: they are unknown formats here.

Users: the server (:func:`oars_deploy.serve.requests.decode_image`) and the limit on image files
(:mod:`oars_deploy.image_limits`, which the predictor's and the training datasets' readers apply).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

#: the most segments / boxes / blocks walked before the size is found (a crafted file cannot make the walk long)
MAX_WALK = 4096
#: the most bytes of a text header (PNM, PFM, HDR) read
MAX_TEXT_HEADER = 65536


@dataclass(frozen=True)
class ImageHeader:
    """What a header declares: ``format`` (e.g. 'PNG'), ``width`` and ``height`` in pixels."""

    format: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        """``width * height``."""
        return self.width * self.height


class ImageHeaderError(ValueError):
    """The size cannot be read: ``format`` is None when the first bytes are no known image format, else the format
    whose header is truncated or corrupt."""

    def __init__(self, message: str, format: str | None = None) -> None:  # noqa: A002  (the header's word)
        super().__init__(message)
        self.format = format


class _Reader:
    """Exact reads and seeks on a binary stream; a short read raises :class:`ImageHeaderError` for ``fmt``."""

    def __init__(self, f: BinaryIO, fmt: str) -> None:
        self.f, self.fmt = f, fmt

    def at(self, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset``."""
        if offset < 0:
            raise ImageHeaderError(f"{self.fmt} header points before the start of the file", self.fmt)
        self.f.seek(offset)
        return self.read(n)

    def read(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        data = self.f.read(n)
        if len(data) != n:
            raise ImageHeaderError(f"{self.fmt} header is truncated", self.fmt)
        return data

    def tell(self) -> int:
        """The current offset."""
        return self.f.tell()


def _png(r: _Reader) -> tuple[int, int]:
    length, kind, width, height = struct.unpack(">I4sII", r.at(8, 16))
    if kind != b"IHDR" or length < 8:
        raise ImageHeaderError("PNG does not start with an IHDR chunk", "PNG")
    return width, height


_JPEG_NO_FRAME = (0xC4, 0xC8, 0xCC)  # DHT, JPG (reserved), DAC: in the SOF range, not frame headers


def _jpeg(r: _Reader) -> tuple[int, int]:
    r.at(0, 2)
    for _ in range(MAX_WALK):
        byte = r.read(1)[0]
        if byte != 0xFF:
            raise ImageHeaderError(f"JPEG segment does not start with a marker (byte 0x{byte:02X} at "
                                   f"{r.tell() - 1})", "JPEG")
        marker = r.read(1)[0]
        while marker == 0xFF:  # fill bytes
            marker = r.read(1)[0]
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # TEM, RSTn: no length
            continue
        if marker in (0xD9, 0xDA):  # EOI, SOS before any frame header
            raise ImageHeaderError("JPEG has no frame header (SOF) before its scan data", "JPEG")
        (length,) = struct.unpack(">H", r.read(2))
        if length < 2:
            raise ImageHeaderError(f"JPEG segment 0xFF{marker:02X} has an invalid length {length}", "JPEG")
        if 0xC0 <= marker <= 0xCF and marker not in _JPEG_NO_FRAME:
            _precision, height, width = struct.unpack(">BHH", r.read(5))
            return width, height
        r.f.seek(length - 2, io.SEEK_CUR)
    raise ImageHeaderError(f"JPEG has no frame header (SOF) in its first {MAX_WALK} segments", "JPEG")


def _bmp(r: _Reader) -> tuple[int, int]:
    (size,) = struct.unpack("<I", r.at(14, 4))
    if size == 12:  # OS/2 BITMAPCOREHEADER
        return struct.unpack("<HH", r.read(4))
    if size < 16:
        raise ImageHeaderError(f"BMP has an unknown info header size {size}", "BMP")
    width, height = struct.unpack("<ii", r.read(8))
    return abs(width), abs(height)  # a negative height is a top-down bitmap


def _skip_gif_sub_blocks(r: _Reader) -> None:
    for _ in range(MAX_WALK * 64):
        size = r.read(1)[0]
        if size == 0:
            return
        r.f.seek(size, io.SEEK_CUR)
    raise ImageHeaderError("GIF extension too long to walk", "GIF")


def _gif(r: _Reader) -> tuple[int, int]:
    width, height, packed = struct.unpack("<HHB", r.at(6, 5))
    r.read(2)  # background colour, aspect
    if packed & 0x80:
        r.f.seek(3 * (2 << (packed & 7)), io.SEEK_CUR)
    for _ in range(MAX_WALK):
        kind = r.read(1)[0]
        if kind == 0x21:  # extension: label, sub-blocks
            r.read(1)
            _skip_gif_sub_blocks(r)
        elif kind == 0x2C:  # the first frame: a decoder's canvas holds it whole
            left, top, w, h = struct.unpack("<HHHH", r.read(8))
            return max(width, left + w), max(height, top + h)
        elif kind == 0x3B:  # trailer: no frame
            return width, height
        else:
            raise ImageHeaderError(f"GIF has an unknown block 0x{kind:02X}", "GIF")
    raise ImageHeaderError(f"GIF has no frame in its first {MAX_WALK} blocks", "GIF")


def _webp(r: _Reader) -> tuple[int, int]:
    chunk = r.at(12, 4)
    if chunk == b"VP8 ":
        data = r.at(20, 10)
        if data[3:6] != b"\x9d\x01\x2a":
            raise ImageHeaderError("WebP VP8 frame has no start code", "WebP")
        width, height = struct.unpack("<HH", data[6:10])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        data = r.at(20, 5)
        if data[0] != 0x2F:
            raise ImageHeaderError("WebP VP8L has no signature byte", "WebP")
        (bits,) = struct.unpack("<I", data[1:5])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        data = r.at(24, 6)
        return int.from_bytes(data[0:3], "little") + 1, int.from_bytes(data[3:6], "little") + 1
    raise ImageHeaderError(f"WebP has an unknown first chunk {chunk!r}", "WebP")


_TIFF_TYPES = {3: ("H", 2), 4: ("I", 4), 16: ("Q", 8)}  # SHORT, LONG, LONG8: the types a size tag may have


def _tiff(r: _Reader) -> tuple[int, int]:
    head = r.at(0, 16 if r.at(2, 2) in (b"+\0", b"\0+") else 8)
    order = "<" if head[:2] == b"II" else ">"
    (version,) = struct.unpack(order + "H", head[2:4])
    big = version == 43
    if big:
        (offset,) = struct.unpack(order + "Q", head[8:16])
        count_fmt, entry_size, count_fmt_t, value_at = "Q", 20, "Q", 12
    else:
        (offset,) = struct.unpack(order + "I", head[4:8])
        count_fmt, entry_size, count_fmt_t, value_at = "H", 12, "I", 8
    count_size = struct.calcsize(count_fmt)
    (count,) = struct.unpack(order + count_fmt, r.at(offset, count_size))
    if count > MAX_WALK:
        raise ImageHeaderError(f"TIFF first IFD claims {count} entries", "TIFF")
    table = r.read(count * entry_size)
    size: dict[int, int] = {}
    for i in range(count):
        entry = table[i * entry_size:(i + 1) * entry_size]
        tag, kind = struct.unpack(order + "HH", entry[:4])
        (n,) = struct.unpack(order + count_fmt_t, entry[4:value_at])
        if tag in (256, 257) and kind in _TIFF_TYPES and n >= 1:
            fmt, width = _TIFF_TYPES[kind]
            if width <= entry_size - value_at:
                (size[tag],) = struct.unpack(order + fmt, entry[value_at:value_at + width])
    if 256 not in size or 257 not in size:
        raise ImageHeaderError("TIFF first IFD has no ImageWidth / ImageLength", "TIFF")
    return size[256], size[257]


def _tokens(r: _Reader, fmt: str, start: int, n: int) -> list[bytes]:
    """The first ``n`` whitespace-separated tokens after ``start`` of a text header (``#`` comments skipped)."""
    r.f.seek(start)
    text = r.f.read(MAX_TEXT_HEADER)
    tokens = []
    for line in text.split(b"\n"):
        tokens += line.split(b"#", 1)[0].split()
        if len(tokens) >= n:
            return tokens[:n]
    raise ImageHeaderError(f"{fmt} header is truncated", fmt)


def _number(token: bytes, fmt: str) -> int:
    if not token.isdigit():
        raise ImageHeaderError(f"{fmt} header has {token[:20]!r} where a size was expected", fmt)
    return int(token)


def _pnm(r: _Reader) -> tuple[int, int]:
    width, height = _tokens(r, "PNM", 2, 2)
    return _number(width, "PNM"), _number(height, "PNM")


def _pam(r: _Reader) -> tuple[int, int]:
    r.f.seek(3)
    size: dict[bytes, int] = {}
    for line in r.f.read(MAX_TEXT_HEADER).split(b"\n"):
        words = line.split(b"#", 1)[0].split()
        if words[:1] == [b"ENDHDR"]:
            break
        if len(words) == 2 and words[0] in (b"WIDTH", b"HEIGHT"):
            size[words[0]] = _number(words[1], "PAM")
    if len(size) != 2:
        raise ImageHeaderError("PAM header has no WIDTH and HEIGHT", "PAM")
    return size[b"WIDTH"], size[b"HEIGHT"]


def _pfm(r: _Reader) -> tuple[int, int]:
    width, height = _tokens(r, "PFM", 2, 2)
    return _number(width, "PFM"), _number(height, "PFM")


def _sun(r: _Reader) -> tuple[int, int]:
    return struct.unpack(">II", r.at(4, 8))


def _hdr(r: _Reader) -> tuple[int, int]:
    r.f.seek(0)
    lines = r.f.read(MAX_TEXT_HEADER).split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip() and i + 1 < len(lines):  # the blank line before the resolution string
            words = lines[i + 1].split()
            if len(words) == 4 and words[0][1:] in (b"X", b"Y") and words[2][1:] in (b"X", b"Y"):
                first, second = _number(words[1], "HDR"), _number(words[3], "HDR")
                return (second, first) if words[0][1:] == b"Y" else (first, second)
            break
    raise ImageHeaderError("Radiance HDR header has no resolution line", "HDR")


def _j2k(r: _Reader, offset: int = 0) -> tuple[int, int]:
    data = r.at(offset, 24)
    if data[:4] != b"\xff\x4f\xff\x51":
        raise ImageHeaderError("JPEG 2000 codestream does not start with SOC and SIZ markers", "JPEG 2000")
    x, y, x0, y0 = struct.unpack(">IIII", data[8:24])
    return x - x0, y - y0


def _boxes(r: _Reader, start: int, end: int | None, fmt: str):
    """(type, content offset, content end) of the ISO/JP2 boxes from ``start`` to ``end`` (None: end of file)."""
    offset = start
    for _ in range(MAX_WALK):
        if end is not None and offset + 8 > end:
            return
        r.f.seek(offset)
        head = r.f.read(8)
        if len(head) < 8:
            return
        size, kind = struct.unpack(">I4s", head)
        content = offset + 8
        if size == 1:
            (size,) = struct.unpack(">Q", r.read(8))
            content += 8
        elif size == 0:
            size = (end if end is not None else 1 << 62) - offset
        if size < content - offset:
            raise ImageHeaderError(f"{fmt} box {kind!r} has an invalid size {size}", fmt)
        yield kind, content, offset + size
        offset += size
    raise ImageHeaderError(f"{fmt} has more than {MAX_WALK} boxes", fmt)


def _jp2(r: _Reader) -> tuple[int, int]:
    for kind, start, end in _boxes(r, 0, None, "JPEG 2000"):
        if kind == b"jp2h":
            for inner, at, _ in _boxes(r, start, end, "JPEG 2000"):
                if inner == b"ihdr":
                    height, width = struct.unpack(">II", r.at(at, 8))
                    return width, height
        if kind == b"jp2c":
            return _j2k(r, start)
    raise ImageHeaderError("JP2 file has no image header box (ihdr)", "JPEG 2000")


def _avif(r: _Reader) -> tuple[int, int]:
    found: list[tuple[int, int]] = []
    for kind, start, end in _boxes(r, 0, None, "AVIF"):
        if kind != b"meta":
            continue
        for inner, at, stop in _boxes(r, start + 4, end, "AVIF"):  # meta is a full box: version + flags first
            if inner != b"iprp":
                continue
            for prop, p_at, p_end in _boxes(r, at, stop, "AVIF"):
                if prop == b"ipco":
                    for item, i_at, _ in _boxes(r, p_at, p_end, "AVIF"):
                        if item == b"ispe":
                            found.append(struct.unpack(">II", r.at(i_at + 4, 8)))
        break
    if not found:
        raise ImageHeaderError("AVIF has no image size property (ispe)", "AVIF")
    return max(w for w, _ in found), max(h for _, h in found)  # a bound over the primary image and its tiles


def _is_avif(head: bytes) -> bool:
    if head[4:8] != b"ftyp":
        return False
    size = min(int.from_bytes(head[0:4], "big"), len(head))
    brands = [head[8:12]] + [head[i:i + 4] for i in range(16, size - 3, 4)]
    return b"avif" in brands or b"avis" in brands


#: (name, test on the first 32 bytes, size reader), tried in order
_FORMATS: list[tuple[str, Callable[[bytes], bool], Callable[[_Reader], tuple[int, int]]]] = [
    ("PNG", lambda h: h.startswith(b"\x89PNG\r\n\x1a\n"), _png),
    ("JPEG", lambda h: h.startswith(b"\xff\xd8\xff"), _jpeg),
    ("BMP", lambda h: h.startswith(b"BM"), _bmp),
    ("GIF", lambda h: h[:6] in (b"GIF87a", b"GIF89a"), _gif),
    ("WebP", lambda h: h[:4] == b"RIFF" and h[8:12] == b"WEBP", _webp),
    ("TIFF", lambda h: h[:4] in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"), _tiff),
    ("PAM", lambda h: h[:3] == b"P7\n", _pam),
    ("PNM", lambda h: len(h) > 2 and h[0:1] == b"P" and h[1:2] in b"123456" and h[2:3].isspace(), _pnm),
    ("PFM", lambda h: h[:2] in (b"PF", b"Pf") and h[2:3].isspace(), _pfm),
    ("Sun raster", lambda h: h.startswith(b"\x59\xa6\x6a\x95"), _sun),
    ("HDR", lambda h: h.startswith((b"#?RADIANCE", b"#?RGBE")), _hdr),
    ("JPEG 2000", lambda h: h.startswith(b"\0\0\0\x0cjP  \r\n\x87\n"), _jp2),
    ("JPEG 2000", lambda h: h.startswith(b"\xff\x4f\xff\x51"), _j2k),
    ("AVIF", _is_avif, _avif),
]
#: the formats whose size this module reads (for messages)
KNOWN_FORMATS: tuple[str, ...] = tuple(dict.fromkeys(name for name, _, _ in _FORMATS))


def read_image_header(f: BinaryIO) -> ImageHeader:
    """The declared size of the image in the seekable binary stream ``f`` (read from its start).

    Raises:
        ImageHeaderError: the first bytes are no known format (``format`` None), or its header is truncated or
            corrupt (``format`` set); never anything else for bad bytes.
    """
    f.seek(0)
    head = f.read(32)
    for name, matches, reader in _FORMATS:
        if matches(head):
            try:
                width, height = reader(_Reader(f, name))
            except (struct.error, IndexError, OverflowError, ValueError) as err:
                if isinstance(err, ImageHeaderError):
                    raise
                raise ImageHeaderError(f"{name} header is truncated or corrupt", name) from None
            if width < 0 or height < 0:
                raise ImageHeaderError(f"{name} header declares a negative size", name)
            return ImageHeader(name, int(width), int(height))
    raise ImageHeaderError(f"the first bytes are not the header of an image format whose size can be read "
                           f"({', '.join(KNOWN_FORMATS)})")


def image_header(data: bytes) -> ImageHeader:
    """:func:`read_image_header` of encoded image bytes (a request body)."""
    return read_image_header(io.BytesIO(data))


def file_image_header(path: str) -> ImageHeader:
    """:func:`read_image_header` of a file (only the header bytes are read).

    Raises:
        ImageHeaderError: as :func:`read_image_header`. OSError: the file cannot be opened.
    """
    with open(path, "rb") as f:
        return read_image_header(f)
