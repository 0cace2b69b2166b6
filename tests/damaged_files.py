"""Damage a checkpoint the way disks and copies do (importable: tests/ is on pythonpath)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def flip_tensor_bytes(path: str | Path, member_suffix: str = "data/0") -> None:
    """Flip two bytes inside a tensor's stored data; the file keeps its size and still opens as a zip."""
    path = Path(path)
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(member_suffix))
    raw = bytearray(path.read_bytes())
    at = info.header_offset + 200  # past the local header (torch pads it to 64 bytes), inside the data
    raw[at] ^= 0xFF
    raw[at + 1] ^= 0xFF
    path.write_bytes(bytes(raw))


def truncate_file(path: str | Path, keep: float = 0.5) -> None:
    """Cut a file to ``keep`` of its bytes, as an interrupted copy or download leaves it (an image stays a file
    with a valid header and no end)."""
    path = Path(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: max(1, int(len(raw) * keep))])
