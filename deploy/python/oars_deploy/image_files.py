"""Listing input images and saying why a file is not one: shared by tools/infer.py, the training pipeline's image
loading and the deploy predictor, so an image model handed a video or a feature file says so the same way
everywhere (instead of "could not read image")."""

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
        from oars_deploy.clips.inputs import folder_contents  # video_inputs imports this module

        held = folder_contents(path, nothing="it holds no videos or feature files either")
        raise UserError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in folder {path}: {held}")
    return files


def unreadable_image_message(path: str) -> str:
    """Why OpenCV could not decode ``path`` as an image, in words: a video or a frame-feature file handed to an image
    model is named as such (it is the wrong kind of input, not a damaged file); anything else is unsupported or
    corrupt."""
    from oars_deploy.clips.inputs import FEATURE_SUFFIXES, VIDEO_SUFFIXES

    suffix = osp.splitext(path)[1].lower()
    takes = f"an image model takes image files ({', '.join(IMAGE_SUFFIXES)})"
    if suffix in VIDEO_SUFFIXES:
        return (f"{path} is a video ({suffix}), not an image: {takes}; videos go to a video model, or give one "
                "video file as -i to predict it frame by frame")
    if suffix in FEATURE_SUFFIXES:
        return f"{path} is a frame-feature file ({suffix}), not an image: {takes}"
    return f"could not read image (unsupported or corrupt file): {path}"
