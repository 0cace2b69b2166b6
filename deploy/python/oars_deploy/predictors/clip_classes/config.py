"""The deploy.yaml of a video (clip) classifier: its ``sampling`` section, input layouts and preprocess steps.

A deploy.yaml with a ``sampling`` section describes a model that takes decoded, sampled, preprocessed clips:

- ``sampling``: ``{clip_len, frame_interval, num_clips, out_of_bound_opt, twice_sample, min_frames, decoder}``:
  the test pipeline's ``SampleFrames`` (test mode; :mod:`oars_deploy.clips.sampling`) and the decoder that numbers the
  frames (``pyav``: frame i = i-th presentation timestamp, :mod:`oars_deploy.clips.decode`);
- ``input``: ``layout`` ``NTCHW`` (2D recognizers: shape [B, V*T, 3, H, W]), ``NCTHW`` (3D, one view:
  [B, 3, T, H, W]) or ``NVCTHW`` (3D, V views: [B, V, 3, T, H, W]); float32, normalised;
- ``preprocess``: the steps of :mod:`oars_deploy.clips.preprocess`, ending with ``FormatShape``.
"""

from __future__ import annotations

from oars_deploy.clips.preprocess import check_video_steps
from oars_deploy.clips.sampling import OUT_OF_BOUND_OPTS
from oars_deploy.errors import DeployError

VIDEO_LAYOUTS = {"NTCHW": 5, "NCTHW": 5, "NVCTHW": 6}  # layout -> rank of input.shape
DECODERS = ("pyav",)


def validate_video(data: dict, path: str) -> None:
    """Check ``sampling``, ``input`` (layout and rank) and the video ``preprocess`` steps of a deploy.yaml;
    :class:`DeployError` naming ``path`` and the key."""
    sampling = data["sampling"]
    if not isinstance(sampling, dict):
        raise DeployError(f"{path}: sampling must be a mapping, got {sampling!r}")
    optional = ("min_frames",) if "min_frames" in sampling else ()  # older exports: the default (2)
    for key in ("clip_len", "frame_interval", "num_clips", *optional):
        value = sampling.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DeployError(f"{path}: sampling.{key} must be a positive int, got {value!r}")
    if sampling.get("out_of_bound_opt", "loop") not in OUT_OF_BOUND_OPTS:
        raise DeployError(f"{path}: sampling.out_of_bound_opt must be one of {list(OUT_OF_BOUND_OPTS)}, got "
                          f"{sampling.get('out_of_bound_opt')!r}")
    if sampling.get("decoder", "pyav") not in DECODERS:
        raise DeployError(f"{path}: sampling.decoder must be one of {list(DECODERS)}, got {sampling['decoder']!r}")
    spec = data["input"]
    layout, shape = spec["layout"], spec["shape"]
    if layout not in VIDEO_LAYOUTS:
        raise DeployError(f"{path}: input.layout of a video model must be one of {list(VIDEO_LAYOUTS)}, got "
                          f"{layout!r}")
    if (not isinstance(shape, list) or len(shape) != VIDEO_LAYOUTS[layout]
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape)):
        raise DeployError(f"{path}: input.shape must have {VIDEO_LAYOUTS[layout]} ints for layout {layout} "
                          f"(B = -1 when dynamic), got {shape!r}")
    check_video_steps(data["preprocess"], path)


def views_per_video(sampling: dict, steps: list[dict]) -> int:
    """Views V of one video: clips (x2 with twice_sample) times the crops of the steps (ThreeCrop: 3)."""
    clips = int(sampling["num_clips"]) * (2 if sampling.get("twice_sample") else 1)
    return clips * 3 ** sum(1 for s in steps if s["type"] == "ThreeCrop")
