"""Listing input images: shared by tools/infer.py and the deploy predictor (imports no torch)."""

from __future__ import annotations

import os
import os.path as osp

from oars.errors import OarsError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def list_images(path: str) -> list[str]:
    """``path`` itself when it is a file, else the images in the folder (sorted)."""
    if osp.isfile(path):
        return [path]
    if not osp.isdir(path):
        raise OarsError(f"input {path!r} is neither an image file nor a folder")
    files = sorted(osp.join(path, f) for f in os.listdir(path) if f.lower().endswith(IMAGE_SUFFIXES))
    if not files:
        raise OarsError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in folder {path}")
    return files
