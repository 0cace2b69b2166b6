"""What a file handed to a video model is, judged cheaply: a still image, a frame-feature file or a video (torch-free).

Why: FFmpeg opens a PNG or JPEG as a one-frame "video" whatever the file is called (its ``png_pipe`` /
``jpeg_pipe`` / ``image2`` demuxers), so a picture renamed ``x.mp4`` in a training list, or an ``image.png``
given to a video predictor, would be sampled into a clip of copies of one frame and trained on or classified
into a motion class. Still images are recognised here, in one place, by their first bytes (before FFmpeg sees
them) and by the demuxer FFmpeg picked (after opening); the training decoders
(``video.datasets.decoders``), the deployed predictor (:mod:`oars_deploy.clips.decode`) and the input listing of
``tools/infer.py`` and ``oars-infer`` (:mod:`oars_deploy.predictors.clip_classes.cli`,
:mod:`oars_deploy.predictors.feature_classes.predictor`) all ask these functions, so they refuse the same files with
the same
message. Nothing here decodes: a file is read for at most :data:`SNIFF_BYTES` bytes.
"""

from __future__ import annotations

import os
import os.path as osp

from oars_deploy.suffixes import FEATURE_SUFFIXES, IMAGE_SUFFIXES, VIDEO_SUFFIXES

SNIFF_BYTES = 4096  # enough for every signature below, APNG's acTL chunk included (it precedes the image data)
VIDEO_MODELS_TAKE = f"video models take video files ({', '.join(VIDEO_SUFFIXES)})"
FEATURE_MODELS_TAKE = (f"frame-feature models take {' / '.join(FEATURE_SUFFIXES)} files of per-frame features "
                       "(one [T, D] array per modality)")


def _png_kind(head: bytes) -> str | None:
    """'png' for a still PNG; None for an animated one (APNG: an ``acTL`` chunk before the first ``IDAT``)."""
    actl, idat = head.find(b"acTL"), head.find(b"IDAT")
    return None if actl != -1 and (idat == -1 or actl < idat) else "png"


def _webp_kind(head: bytes) -> str | None:
    """'webp' for a still WebP; None for an animated one (VP8X chunk with the animation flag 0x02)."""
    return None if head[12:16] == b"VP8X" and len(head) > 20 and head[20] & 0x02 else "webp"


def sniff_still_image(head: bytes) -> str | None:
    """The image format of a file's first bytes, when they are a still image's signature.

    Args:
        head: the first bytes of the file (up to :data:`SNIFF_BYTES`).

    Returns:
        'png', 'jpeg', 'bmp', 'tiff' or 'webp'; None for anything else, animated PNG / WebP included (those are
        short videos, and the frame-count check judges them). GIF is not listed for the same reason.
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png_kind(head)
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"BM") and head[6:10] == b"\0\0\0\0":  # BMP: the reserved header fields are zero
        return "bmp"
    if head.startswith((b"II*\0", b"MM\0*")):
        return "tiff"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return _webp_kind(head)
    return None


def still_image_kind(path: str) -> str | None:
    """The still-image format of the file ``path`` by its first bytes, whatever its suffix (None: not a still
    image, or unreadable: the decoder then says why)."""
    try:
        with open(path, "rb") as f:
            return sniff_still_image(f.read(SNIFF_BYTES))
    except OSError:
        return None


def still_image_demuxer(format_name: str, codec_name: str = "") -> str | None:
    """The image format when FFmpeg opened a file with one of its single-image demuxers.

    Args:
        format_name: ``container.format.name`` (e.g. 'png_pipe', 'jpeg_pipe', 'image2', 'mov,mp4,m4a,3gp,3g2,mj2').
        codec_name: the video stream's codec name (names the image for 'image2').

    Returns:
        e.g. 'png' for 'png_pipe', the codec name (or 'image') for 'image2' / 'image2pipe'; None for a video
        demuxer.
    """
    names = set(str(format_name).split(","))
    pipes = sorted(n for n in names if n.endswith("_pipe"))
    if pipes:
        return pipes[0][: -len("_pipe")]
    if names & {"image2", "image2pipe"}:
        return codec_name or "image"
    return None


def still_image_message(path: str, kind: str) -> str:
    """The one message for a still image given where a video is expected (training lists and predictors)."""
    return (f"{path} is a still image ({kind}), not a video: a video model classifies the motion across a clip's "
            f"frames; {VIDEO_MODELS_TAKE}")


def feature_file_message(path: str) -> str:
    """The message for a frame-feature file given where a video is expected."""
    return (f"{path} is a frame-feature file ({osp.splitext(path)[1].lower()}), not a video: {VIDEO_MODELS_TAKE}; "
            "feature files are classified by the frame-feature models (AttentionCluster, AttentionLSTM, NeXtVLAD)")


def not_a_video(path: str) -> str | None:
    """Why the file ``path`` is certainly not a video (a still image by its bytes, a feature file by its suffix),
    or None (it may be one: the decoder decides)."""
    kind = still_image_kind(path)
    if kind is not None:
        return still_image_message(path, kind)
    if path.lower().endswith(FEATURE_SUFFIXES):
        return feature_file_message(path)
    return None


def not_a_feature_file(path: str) -> str | None:
    """Why the file ``path`` is certainly not a frame-feature file (a still image by its bytes, a video by its
    suffix), or None."""
    kind = still_image_kind(path)
    if kind is not None:
        return f"{path} is a still image ({kind}), not a frame-feature file: {FEATURE_MODELS_TAKE}"
    if path.lower().endswith(VIDEO_SUFFIXES):
        return (f"{path} is a video, not a frame-feature file: {FEATURE_MODELS_TAKE}, extracted from the videos "
                "beforehand; video files are classified by the clip models (TSN, TSM, R(2+1)D, ...)")
    return None


def folder_contents(folder: str, nothing: str = "it holds none of those") -> str:
    """What a folder holds instead of the inputs a model wanted, for the "no videos in folder" messages:
    e.g. ``'it holds 3 still images (a.png, b.jpg, c.png)'``, or ``'it holds none of those'``."""
    names = sorted(os.listdir(folder))
    groups = [("still image", IMAGE_SUFFIXES), ("frame-feature file", FEATURE_SUFFIXES), ("video file", VIDEO_SUFFIXES)]
    found = []
    for noun, suffixes in groups:
        hits = [n for n in names if n.lower().endswith(suffixes)]
        if hits:
            shown = ", ".join(hits[:3]) + (", ..." if len(hits) > 3 else "")
            found.append(f"{len(hits)} {noun}{'s' if len(hits) != 1 else ''} ({shown})")
    return "it holds " + " and ".join(found) if found else nothing
