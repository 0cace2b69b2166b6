"""Which frames each snippet takes, and the test pipeline's steps that turn those frames into the model's input.

Snippet ``k`` of a video covers frames ``[k*S, k*S + N)`` (``N`` = ``--snippet``, ``S`` = ``--stride``). Only
whole snippets are taken: ``T = (F - N) // S + 1`` for a video of ``F >= N`` frames (the last ``< S`` frames
after the last whole snippet are not covered), and one snippet of the ``F`` frames when ``F < N``. So
``feature_frame = T * S <= F`` whenever ``F >= N`` and ``S <= N``, as ActivityNet's feature files
(``feature_frame`` <= ``duration_frame``) have it (otherwise it is capped at ``F``: video.features.outputs).

Inside a snippet the frames are chosen as the recognizer's test pipeline chooses a clip from a video: its
``SampleFrames`` (test mode: centred, no random draw) runs on a video of ``N`` frames, and the relative indices
are shifted by ``k*S``. The pipeline's steps after ``VideoDecode`` (resize, crops, ``FormatShape``,
``PackActionInputs``) then run unchanged, so a snippet's input is exactly the test pipeline's clip for those frame
indices.

Default ``N``: ``clip_len * frame_interval * num_clips`` of that ``SampleFrames`` -- the frames one test sample
spreads its clips over when they sit side by side with no gap (TSN/TSM 1x1x8: 8 frames, one per segment;
R(2+1)D 32x2x1: 64 frames, every other one fed). ``S`` defaults to ``N`` (snippets tile the video).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mmengine.config import Config
from mmengine.dataset import Compose

from oars.errors import OarsError
from oars.inference import build_test_pipeline
from oars_deploy.predictors.video_segments.segments.snippets import num_snippets  # noqa: F401  (one rule for training and deployment)

#: the three steps of a test pipeline that reads a video file, in this order; everything after DECODE is reused
OPEN, SAMPLE, DECODE = "VideoInit", "SampleFrames", "VideoDecode"


class SnippetPipeline:
    """The test pipeline of a recognizer config cut around its decoding step.

    Args:
        cfg: a config whose test (or val) pipeline is ``VideoInit``, ``SampleFrames`` (``test_mode: true``),
            ``VideoDecode``, then the spatial and formatting steps.

    Attributes:
        sampler: the pipeline's ``SampleFrames`` instance.
        after_decode: ``Compose`` of the steps after ``VideoDecode``.
        default_snippet: ``clip_len * frame_interval * num_clips`` of the sampler (see the module docstring).

    Raises:
        OarsError: the pipeline does not open video files in that order, or its sampling is random.
    """

    def __init__(self, cfg: Config) -> None:
        full = build_test_pipeline(cfg)
        names = [type(t).__name__ for t in full.transforms]
        if not (OPEN in names and SAMPLE in names and DECODE in names
                and names.index(OPEN) < names.index(SAMPLE) < names.index(DECODE)):
            raise OarsError(f"{cfg.filename}: features are extracted from video files, but the test pipeline "
                            f"{names} does not read one as {OPEN} -> {SAMPLE} -> {DECODE} (frame-folder and "
                            "feature-file models cannot be run on videos)")
        self.sampler = full.transforms[names.index(SAMPLE)]
        if not getattr(self.sampler, "test_mode", False):
            raise OarsError(f"{cfg.filename}: the test pipeline's {SAMPLE} has test_mode false (random frames); "
                            "snippet features must be reproducible: set its test_mode: true with -o")
        self.after_decode = Compose(full.transforms[names.index(DECODE) + 1:])
        self.default_snippet = int(self.sampler.clip_len * self.sampler.frame_interval * self.sampler.num_clips)

    def relative_indices(self, path: str, window: int) -> dict:
        """The sampler's choice for a snippet of ``window`` frames.

        Args:
            path: the video, named in errors.
            window: frames in the snippet (``N``, or ``F`` for a video shorter than ``N``).

        Returns:
            ``frame_inds`` (int64 [num_clips * clip_len], 0-based within the snippet; doubled by
            ``twice_sample``), ``clip_len``, ``frame_interval``, ``num_clips``: the keys ``SampleFrames`` writes.

        Raises:
            DataError: fewer frames than the sampler's ``min_frames`` (names the file).
        """
        out = self.sampler({"filename": path, "total_frames": int(window)})
        return {k: out[k] for k in ("frame_inds", "clip_len", "frame_interval", "num_clips")}

    def clip(self, path: str, total_frames: int, sampled: dict, start: int,
             frames: Sequence[np.ndarray]) -> dict:
        """One snippet's packed input: the steps after ``VideoDecode`` on ``frames``.

        Args:
            path: the video file (``filename`` of the sample).
            total_frames: the video's frame count.
            sampled: :meth:`relative_indices` of the snippet's window.
            start: the snippet's first frame ``k*S``.
            frames: HxWx3 uint8 BGR frames, one per entry of ``sampled['frame_inds']`` (same order; repeated
                indices may share an array: the steps copy when they stack).

        Returns:
            ``PackActionInputs``' dict: ``inputs`` uint8 [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW) and
            ``data_samples``.
        """
        shape = tuple(int(s) for s in frames[0].shape[:2])
        results = {"filename": path, "start_index": 0, "modality": "RGB", "total_frames": int(total_frames),
                   **sampled, "frame_inds": np.asarray(sampled["frame_inds"], dtype=np.int64) + int(start),
                   "imgs": list(frames), "original_shape": shape, "img_shape": shape}
        return self.after_decode(results)
