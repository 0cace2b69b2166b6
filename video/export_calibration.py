"""INT8 calibration data of a clip classifier (``tools/export.py --int8 --calib-dir VIDEOS``): the folder's videos
decoded, sampled and pre-processed by the deployed predictor's own code, a few clips per video.

Why not images: a clip classifier's graph takes [N, V*T, 3, H, W] (or [N, (V,) 3, T, H, W]) clips of frames sampled
over a whole video, so its activation ranges must come from such clips; the reading is ``oars_deploy``'s
(:mod:`oars_deploy.clips`), as the predictor's, so calibration sees what deployment sees. The core
(:mod:`oars.export.precision`) batches the units, feeds ONNX Runtime's calibrator and checks the agreement; the
video task hands this reader over through :meth:`video.task.VideoExporter.calibration_reader`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mmengine.config import Config

from oars.export.errors import ExportError
from oars.export.precision import CalibrationReader
from oars.export.spec import ExportOptions
from video.export_features import is_feature_config

CALIB_CLIPS = 3  # INT8 calibration clips per video (export.calib_clips): the test sampling's and two shifted ones


class VideoCalibrationReader(CalibrationReader):
    """``--int8 --calib-dir DIR`` of a clip classifier: DIR's videos decoded, sampled and pre-processed by the
    runtime predictor's own code (:mod:`oars_deploy.clips`: PyAV decoding, deploy.yaml's ``sampling`` and video
    ``preprocess``), so the ranges are calibrated on the inputs the deployed graph sees.

    Each video gives ``clips_per_video`` inputs: the test sampling with every segment's clip start moved to the
    fractions ``(2j + 1) / (2 k)`` of its segment (k = ``clips_per_video``; one clip is the test sampling itself,
    the centre, and so is the middle one of an odd k), which spreads a short calibration set over more frames.
    One unit is ``(path, fraction)``; a batch reads only its own units (one decode per unit), so memory stays
    bounded by the batch.

    Args:
        clips_per_video: k >= 1.
    """

    what = "videos"

    def __init__(self, clips_per_video: int = CALIB_CLIPS) -> None:
        if isinstance(clips_per_video, bool) or not isinstance(clips_per_video, int) or clips_per_video < 1:
            raise ExportError(f"export.calib_clips must be a positive int (clips per calibration video), got "
                              f"{clips_per_video!r}")
        self.clips_per_video = clips_per_video

    def list_files(self, folder: str) -> list[str]:
        """The videos of ``folder`` as ``oars-infer`` lists them (a folder without videos: a ``UserError`` saying
        what it holds)."""
        from oars_deploy.predictors.clip_classes.cli import list_videos

        return list_videos(folder)

    def items(self, files: Sequence[str]) -> list[tuple[str, float]]:
        """``(path, fraction)`` per calibration clip, the videos in order."""
        k = self.clips_per_video
        return [(f, (2 * j + 1) / (2 * k)) for f in files for j in range(k)]

    def load(self, items: Sequence[tuple[str, float]], deploy_cfg: dict) -> np.ndarray:
        """float32 [len(items), *input.shape[1:]]: one model input per unit (:func:`calibration_clip`).

        Raises:
            ExportError: a video cannot be decoded or is too short for the sampling (the runtime's message).
        """
        from oars_deploy.errors import DeployError

        want = tuple(int(v) for v in deploy_cfg["input"]["shape"][1:])
        clips = []
        for path, fraction in items:
            try:
                clip = calibration_clip(path, deploy_cfg["sampling"], deploy_cfg["preprocess"], fraction)
            except DeployError as err:
                raise ExportError(f"--calib-dir: {err}") from None
            clips.append(clip.reshape(want))
        return np.stack(clips)


def shifted_clip_starts(total: int, sampling: dict, fraction: float) -> np.ndarray:
    """The test sampling's clip starts with each start at ``fraction`` of its segment instead of the centre
    (:func:`oars_deploy.clips.sampling.centred_clip_starts` at ``position=fraction``, deploy.yaml's ``sampling``):
    np.int64 [num_clips] ([2 * num_clips] with ``twice_sample``, whose extra starts stay at the segments'
    beginnings)."""
    from oars_deploy.clips.sampling import centred_clip_starts

    return centred_clip_starts(total, int(sampling["clip_len"]), int(sampling.get("frame_interval", 1)),
                               int(sampling.get("num_clips", 1)), bool(sampling.get("twice_sample", False)),
                               position=fraction)


def calibration_clip(path: str, sampling: dict, steps: list[dict], fraction: float = 0.5) -> np.ndarray:
    """One calibration input of a video: ``oars_deploy``'s ``video_input`` with the clip starts at ``fraction``
    of their segments (:func:`shifted_clip_starts`; 0.5 is the deployed input itself).

    Returns:
        float32 [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW), as ``video_input``.

    Raises:
        oars_deploy.errors.DeployError: not a decodable video, or fewer frames than ``sampling.min_frames``.
    """
    from oars_deploy.clips.decode import VideoFile
    from oars_deploy.clips.preprocess import preprocess_clip
    from oars_deploy.clips.sampling import check_frame_count, clip_indices
    from oars_deploy.errors import DeployError

    clip_len, interval = int(sampling["clip_len"]), int(sampling.get("frame_interval", 1))
    with VideoFile(path) as video:
        check_frame_count(path, video.total_frames, sampling, DeployError)
        starts = shifted_clip_starts(video.total_frames, sampling, fraction)
        frames = video.frames(clip_indices(starts, clip_len, interval, video.total_frames,
                                           sampling.get("out_of_bound_opt", "loop")))
    return preprocess_clip(frames, steps, len(starts), clip_len)


def calibration_reader(cfg: Config, options: ExportOptions) -> VideoCalibrationReader | None:
    """The INT8 calibration reader of a clip classifier (``export.calib_clips`` clips per video, default
    :data:`CALIB_CLIPS`); None for a frame-feature model (its INT8 export is refused)."""
    if is_feature_config(cfg):
        return None
    return VideoCalibrationReader(options.extra.get("calib_clips", CALIB_CLIPS))
