"""A sample's data info as the JSON member of a shard, and back, unchanged: numpy arrays and tuples survive the
trip (tagged), so the decoded dict is the one the source dataset hands its pipeline.

Which fields are files: every string field named ``*_path`` or ``filename`` (image, label map, paired images,
video, features). Each such file becomes the member ``<key>.<field><ext>`` of the shard (WebDataset groups members
by the part of the name before the first dot, so ``000012.img_path.png`` and ``000012.json`` are one sample) and
the field holds the member's suffix ``<field><ext>`` in the JSON record.
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any

import numpy as np

from oars.data import storage
from oars.errors import DataError

#: the JSON member of every sample, and the record's key listing the fields that are shard members
RECORD_EXT = "json"
MEMBERS_KEY = "__members__"
#: members decoded from memory by the loading transforms; any other file (a video) is written to a scratch file
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def is_file_field(name: str) -> bool:
    """Whether a data info field names a file (``*_path`` or ``filename``)."""
    return name.endswith("_path") or name == "filename"


def file_fields(info: dict, where: str) -> dict[str, str]:
    """The fields of ``info`` that name a file -> the file (a local path or a URL).

    Raises:
        DataError: a field names a folder (a frame folder: shards hold files, one member each), naming ``where``.
    """
    out = {}
    for name, value in info.items():
        if isinstance(value, str) and value and is_file_field(name):
            out[name] = value
        elif name == "frame_dir" and value:
            raise DataError(f"{where}: frame_dir {value!r} is a folder of frames; shards hold one member per file, "
                            "so convert the frames to a video file (or use a video list) before making shards")
    return out


def member_suffix(field: str, path: str) -> str:
    """``<field><ext>`` (``img_path.png``): the member name after ``<key>.``."""
    ext = posixpath.splitext(path.replace(os.sep, "/"))[1].lower()
    return f"{field}{ext}"


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise DataError(f"a data info value of type {type(value).__name__} ({value!r:.80}) cannot be written to a shard "
                    "(expected numbers, strings, lists, tuples, dicts and numpy arrays)")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"]).reshape(value["shape"])
        if "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def encode_record(info: dict, members: dict[str, str]) -> bytes:
    """The JSON member of a sample: ``info`` with each file field replaced by its member suffix (``members``:
    field -> suffix), listed under ``__members__``."""
    record = {k: (members[k] if k in members else v) for k, v in info.items()}
    record[MEMBERS_KEY] = dict(members)
    return json.dumps(_encode(record), separators=(",", ":")).encode("utf-8")


def decode_record(data: bytes, where: str) -> tuple[dict, dict[str, str]]:
    """(the data info, field -> member suffix) of a JSON member; ``where`` names it in the error."""
    try:
        record = _decode(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as err:
        raise DataError(f"{where}: not a sample record (invalid JSON: {err})") from None
    if not isinstance(record, dict) or not isinstance(record.get(MEMBERS_KEY), dict):
        raise DataError(f"{where}: not an oars sample record (no {MEMBERS_KEY!r}); make the shards with "
                        "tools/make_shards.py")
    members = record.pop(MEMBERS_KEY)
    return record, members


def encode_value(value: Any) -> Any:
    """JSON-ready ``value`` (arrays and tuples tagged), for the index's metainfo."""
    return _encode(value)


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    return _decode(value)


def is_local_file(path: Any) -> bool:
    """Whether ``path`` is a string naming an existing local file or object (metainfo files such as ``ann_file``)."""
    return isinstance(path, str) and bool(path) and not storage.is_url(path) and os.path.isfile(path)
