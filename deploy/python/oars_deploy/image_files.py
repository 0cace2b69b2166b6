"""Listing input images and saying why a file is not one: shared by tools/infer.py, the training pipeline's image
loading and the deploy predictor, so an image model handed a video or a feature file says so the same way
everywhere (instead of "could not read image").

:func:`listed_files` expands the two input forms that name files rather than hold them, a glob pattern and a
``.txt``/``.lst`` list: ``oars-infer --ray`` predicts them, and the output-folder rule
(:func:`oars_deploy.output_paths.check_output_folder`) protects every file they name, whatever the mode.
"""

from __future__ import annotations

import glob
import os
import os.path as osp

from oars_deploy.clips.inputs import folder_contents
from oars_deploy.errors import UserError
from oars_deploy.suffixes import FEATURE_SUFFIXES, IMAGE_SUFFIXES, VIDEO_SUFFIXES

LIST_SUFFIXES = (".txt", ".lst")
GLOB_CHARS = "*?["


def input_form(spec: str) -> str:
    """What kind of ``-i`` value ``spec`` is: ``'glob'`` (holds ``*?[`` and is no existing path), ``'list'`` (an
    existing ``.txt``/``.lst`` file), else ``'path'`` (a file or a folder, listed by the model's plug-in)."""
    if not osp.exists(spec) and any(c in spec for c in GLOB_CHARS):
        return "glob"
    if osp.isfile(spec) and spec.lower().endswith(LIST_SUFFIXES):
        return "list"
    return "path"


def describe_input(spec: str, flag: str = "-i") -> str:
    """``spec`` as a message names it: ``-i 'imgs/*.png' (a glob pattern)``, ``-i list.txt (a list of files)`` or
    ``-i imgs``."""
    form = input_form(spec)
    if form == "glob":
        return f"{flag} {spec!r} (a glob pattern)"
    if form == "list":
        return f"{flag} {spec} (a list of files)"
    return f"{flag} {spec}"


def listed_files(spec: str, flag: str = "-i") -> list[str] | None:
    """The files a glob pattern (``**`` recursive) or a ``.txt``/``.lst`` list names (one path a line, relative to
    the list's folder; blank lines and ``#`` comments skipped), in order; None when ``spec`` is neither (a file or a
    folder: the plug-in lists it). A pattern matching nothing gives ``[]`` (the caller says so).

    Raises:
        UserError: the list file cannot be read.
    """
    form = input_form(spec)
    if form == "glob":
        return sorted(p for p in glob.glob(spec, recursive=True) if osp.isfile(p))
    if form != "list":
        return None
    root = osp.dirname(spec)
    try:
        with open(spec, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise UserError(f"{flag} {spec}: cannot read the list ({why})") from None
    return [line if osp.isabs(line) else osp.join(root, line) for line in lines if line and line[0] != "#"]


def list_images(path: str) -> list[str]:
    """``path`` itself when it is a file, else the images in the folder (sorted)."""
    if osp.isfile(path):
        return [path]
    if not osp.isdir(path):
        raise UserError(f"input {path!r} is neither an image file nor a folder")
    files = sorted(osp.join(path, f) for f in os.listdir(path) if f.lower().endswith(IMAGE_SUFFIXES))
    if not files:
        held = folder_contents(path, nothing="it holds no videos or feature files either")
        raise UserError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in folder {path}: {held}")
    return files


def unreadable_image_message(path: str) -> str:
    """Why OpenCV could not decode ``path`` as an image, in words: a video or a frame-feature file handed to an image
    model is named as such (it is the wrong kind of input, not a damaged file); anything else is unsupported or
    corrupt."""
    suffix = osp.splitext(path)[1].lower()
    takes = f"an image model takes image files ({', '.join(IMAGE_SUFFIXES)})"
    if suffix in VIDEO_SUFFIXES:
        return (f"{path} is a video ({suffix}), not an image: {takes}; videos go to a video model, or give one "
                "video file as -i to predict it frame by frame")
    if suffix in FEATURE_SUFFIXES:
        return f"{path} is a frame-feature file ({suffix}), not an image: {takes}"
    return f"could not read image (unsupported or corrupt file): {path}"
