"""Listing input images: shared by tools/infer.py and the deploy predictor."""

from __future__ import annotations

import os
import os.path as osp

from oars_deploy.errors import UserError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def list_images(path: str) -> list[str]:
    """``path`` itself when it is a file, else the images in the folder (sorted)."""
    if osp.isfile(path):
        return [path]
    if not osp.isdir(path):
        raise UserError(f"input {path!r} is neither an image file nor a folder")
    files = sorted(osp.join(path, f) for f in os.listdir(path) if f.lower().endswith(IMAGE_SUFFIXES))
    if not files:
        raise UserError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in folder {path}")
    return files
