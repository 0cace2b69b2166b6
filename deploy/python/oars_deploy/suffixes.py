"""The file suffixes by which an input is listed or named: images, videos, frame-feature files.

Why one leaf module: the image listing (:mod:`oars_deploy.image_files`) names a video or a feature file handed to
an image model, and the video inputs (:mod:`oars_deploy.clips.inputs`) name an image handed to a video model; each
needs the other's suffixes, and both import them from here (neither imports the other for them).
"""

from __future__ import annotations

IMAGE_SUFFIXES: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_SUFFIXES: tuple[str, ...] = (".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg")
FEATURE_SUFFIXES: tuple[str, ...] = (".npz", ".pkl", ".pickle")
