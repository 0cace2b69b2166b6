"""The largest image a reader of files decodes, and the one check of it from the file's header.

Why a module of its own: the predictor (:func:`oars_deploy.outputs.read_image`) and the training datasets
(``oars.data.transforms.loading``) both refuse a decompression bomb before decoding, with the same limit and the
same words; the header parsing itself is :mod:`oars_deploy.image_header`'s.
"""

from __future__ import annotations

from oars_deploy.image_files import unreadable_image_message
from oars_deploy.image_header import ImageHeaderError, file_image_header

#: the largest image (width * height) read from a file: above Pillow's own decompression-bomb error (2 x its
#: MAX_IMAGE_PIXELS = 178,956,970 px) and below OpenCV's 2**30 px, i.e. up to 600 MB of BGR pixels; a file
#: declaring more is refused from its header, before anything is allocated
MAX_FILE_PIXELS = 200_000_000


def file_size_problem(path: str, max_pixels: int = MAX_FILE_PIXELS, corrupt_is_problem: bool = True) -> str | None:
    """Why the image file ``path`` must not be decoded, from its header alone, or None when it may be.

    The one check behind every reader of image files that a header can lie to: the predictor's
    (:func:`oars_deploy.outputs.read_image`) and the training datasets' (``oars.data.transforms.loading``); each
    raises its own error with this text. A file in a format this module does not read is left to the decoder
    (None); one whose header is truncated or corrupt is a problem (a decoder may still allocate what it declares).

    Args:
        path: an existing image file.
        max_pixels: the largest ``width * height`` allowed.
        corrupt_is_problem: a truncated or corrupt header is a problem (OpenCV, which decodes what it can); False
            leaves it to a reader that says so itself (PIL, which also guards its own allocations).

    Returns:
        None, or the message naming ``path``, what its header declares and the limit.
    """
    try:
        header = file_image_header(path)
    except ImageHeaderError as err:
        if err.format is None or not corrupt_is_problem:
            return None
        return f"{unreadable_image_message(path)} (its {err})"
    except OSError as err:
        return f"could not read image {path}: {err.strerror or err}"
    if header.pixels <= max_pixels:
        return None
    return (f"{path}: image of {header.width}x{header.height} = {header.pixels} pixels (declared in its "
            f"{header.format} header) exceeds the limit of {max_pixels} pixels for an input image; refused before "
            "decoding (a decompression bomb, or downscale it first)")
