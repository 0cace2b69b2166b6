"""What an ``oars-serve`` request may carry, checked before the model sees it: the body's media type, the
multipart ``file`` field, and an image's size read from its header before it is decoded.

Every refusal is a :class:`RequestError` with the HTTP status and one sentence that says what was expected; the
server answers it as ``{"error": message}`` and keeps serving. Why header sizes: a 50 kB PNG can claim
100000 x 100000 pixels (a decompression bomb); the pixel limit is checked on the size the header declares
(:mod:`oars_deploy.image_header`, every format OpenCV decodes here) before OpenCV allocates the image, and bytes
whose header cannot be read are refused rather than decoded blind.
A request never names a server path: the optional file name (multipart ``filename``, ``X-Filename`` header) is
reduced to its base name and only labels the record's ``input``.
"""

from __future__ import annotations

import os.path as osp
import re
from email.message import Message

from oars_deploy.image_files import IMAGE_SUFFIXES
from oars_deploy.image_header import KNOWN_FORMATS, ImageHeader, ImageHeaderError, image_header

RAW_IMAGE_TYPES = ("image/", "application/octet-stream")
RAW_VIDEO_TYPES = ("video/", "application/octet-stream")
MULTIPART = "multipart/form-data"
FILE_FIELD = "file"
DEFAULT_NAME = "request"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._+-]")


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx/5xx) and one clear ``message``; ``headers`` extra response
    headers (``Retry-After``, ``WWW-Authenticate``)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def safe_name(name: str | None, default: str = DEFAULT_NAME) -> str:
    """A client's file name as a label: the base name only (no folders, whatever separator), odd characters
    replaced by ``_``, at most 128 characters; ``default`` when nothing is left. Never opened as a path."""
    if not name:
        return default
    base = re.split(r"[\\/]", str(name))[-1].strip()
    base = _SAFE_NAME.sub("_", base)[:128].lstrip(".")
    return base or default


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, lower case, without parameters ('' when absent)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _header_params(value: str, header: str) -> Message:
    """A one-header :class:`email.message.Message` (for ``get_param``: quoted and RFC 2231 parameters)."""
    msg = Message()
    msg[header] = value
    return msg


def multipart_fields(body: bytes, content_type: str) -> dict[str, tuple[bytes, str | None]]:
    """Every field of a multipart/form-data body (split on the boundary, binary-safe: the content is not
    line-parsed, so CR/LF bytes inside an image survive); the first of repeated names wins.

    Args:
        body: the whole request body. content_type: its Content-Type header (with the ``boundary``).

    Returns:
        ``{name: (bytes, filename or None)}`` in the body's order.

    Raises:
        RequestError: 400 when the body is not valid multipart.
    """
    boundary = _header_params(content_type, "content-type").get_param("boundary", header="content-type")
    if not boundary or not isinstance(boundary, str):
        raise RequestError(400, "multipart/form-data body without a boundary parameter in Content-Type")
    pieces = body.split(b"--" + boundary.encode("latin-1"))
    if len(pieces) < 2:
        raise RequestError(400, "could not parse the multipart/form-data body (no part with the boundary)")
    fields: dict[str, tuple[bytes, str | None]] = {}
    for piece in pieces[1:]:
        if piece.startswith(b"--"):  # the closing delimiter
            break
        head, sep, content = piece.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            raise RequestError(400, "could not parse the multipart/form-data body (a part without headers)")
        disposition = ""
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.strip().lower() == "content-disposition":
                disposition = value.strip()
        params = _header_params(disposition, "content-disposition")
        name = str(params.get_param("name", header="content-disposition"))
        filename = params.get_param("filename", header="content-disposition")
        fields.setdefault(name, (content.removesuffix(b"\r\n"), str(filename) if filename else None))
    return fields


def multipart_file(body: bytes, content_type: str, field: str = FILE_FIELD) -> tuple[bytes, str | None]:
    """The bytes and file name of the multipart/form-data field ``field`` (:func:`multipart_fields`).

    Raises:
        RequestError: 400 when the body is not valid multipart or has no field ``field``.
    """
    fields = multipart_fields(body, content_type)
    if field not in fields:
        raise RequestError(400, f"multipart body has no field {field!r} (fields: {', '.join(fields) or 'none'}); "
                                f"send the input as the field {field!r}")
    return fields[field]


def request_payload(body: bytes, content_type: str | None, raw_types: tuple[str, ...],
                    filename_header: str | None) -> tuple[bytes, str]:
    """The input bytes and their label name from a request: a raw body of one of ``raw_types`` (prefixes such as
    ``image/``) or a multipart ``file`` field.

    Raises:
        RequestError: 415 for another media type, 400 for an empty input or a multipart body without ``file``.
    """
    kind = media_type(content_type)
    if kind == MULTIPART:
        data, filename = multipart_file(body, content_type or "")
        name = safe_name(filename or filename_header)
    elif any(kind.startswith(t) for t in raw_types):
        data, name = body, safe_name(filename_header)
    else:
        raise RequestError(415, f"unsupported Content-Type {kind or '(none)'!r}: send the input as the raw body "
                                f"({', '.join(t + ('*' if t.endswith('/') else '') for t in raw_types)}) or as "
                                f"the multipart/form-data field {FILE_FIELD!r}")
    if not data:
        raise RequestError(400, "the request holds an empty input (0 bytes)")
    return data, name


def check_pixels(width: int, height: int, max_pixels: int, name: str, where: str = "") -> None:
    """Raise a 413 :class:`RequestError` when ``width * height`` exceeds ``max_pixels`` (``where``: appended, e.g.
    '; declared in its PNG header, refused before decoding')."""
    if width * height > max_pixels:
        raise RequestError(413, f"{name}: image of {width}x{height} = {width * height} pixels exceeds the server's "
                                f"limit of {max_pixels} pixels (--max-pixels){where}")


def check_image_header(data: bytes, name: str, max_pixels: int) -> ImageHeader:
    """The size ``data``'s header declares, checked against ``max_pixels`` before anything decodes the pixels.

    Raises:
        RequestError: 413 above ``max_pixels``; 400 when the header cannot be read (not an image, a format whose
            size this server cannot check, or a truncated / corrupt header): never decoded blind.
    """
    try:
        header = image_header(data)
    except ImageHeaderError as err:
        if err.format is None:
            raise RequestError(400, f"{name}: could not decode the body as an image: {err}; image models take "
                                    f"{', '.join(KNOWN_FORMATS)} (files {', '.join(IMAGE_SUFFIXES)})") from None
        raise RequestError(400, f"{name}: could not decode the body as an image: its {err} (its size cannot be "
                                "checked against --max-pixels, so it is not decoded)") from None
    check_pixels(header.width, header.height, max_pixels, name,
                 f"; declared in its {header.format} header, refused before decoding")
    return header


def decode_image(data: bytes, name: str, max_pixels: int):
    """BGR uint8 [H, W, 3] of an encoded image, as ``cv2.imread`` reads the same file (``cv2.IMREAD_COLOR``), so
    a request and ``oars-infer`` on that file see the same pixels.

    Raises:
        RequestError: 413 above ``max_pixels``, from the header before any decoding
            (:func:`check_image_header`; the decoded size is checked again); 400 for a header that cannot be read
            or bytes OpenCV cannot decode (not an image, truncated, unsupported).
    """
    import cv2
    import numpy as np

    check_image_header(data, name, max_pixels)
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None or img.size == 0:
        suffix = osp.splitext(name)[1].lower()
        hint = "" if not suffix or suffix in IMAGE_SUFFIXES else f" (its name ends in {suffix})"
        raise RequestError(400, f"{name}: could not decode the body as an image (not an image, truncated or "
                                f"unsupported{hint}); image models take {', '.join(IMAGE_SUFFIXES)}")
    check_pixels(img.shape[1], img.shape[0], max_pixels, name)
    return img
