"""Reading one video's features from several streams (RGB, optical flow, ...) stored in one folder per stream, as
C-TCN's data is (PaddleVideo reads an RGB and a flow file per video and concatenates their columns)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms.localization_loading import read_localization_feature


@TRANSFORMS.register_module()
class LoadLocalizationStreams:
    """Read each stream's ``<feature folder>/<stream>/<video file>`` and put their columns side by side in
    ``results['features']`` (float32 [T, sum of widths], the streams in the order given); set ``feature_length``.

    ``<feature folder>/<video file>`` is the dataset's ``feature_path`` (``data_prefix['feature']`` joined with
    the video id and suffix), so ``data_prefix: {feature: ctcn_features}`` reads ``ctcn_features/rgb/ID.npy`` and
    ``ctcn_features/flow/ID.npy``. Streams of different lengths are cut to the shortest, as PaddleVideo's
    C-TCN reader does (its flow has a snippet fewer than its RGB when the frame count is odd).

    Args:
        streams: ``{name: width}``, the sub-folder name and the expected columns of each stream (C-TCN:
            ``{rgb: 201, flow: 201}``; the model's ``streams`` in the same order).
    """

    def __init__(self, streams: Mapping[str, int]) -> None:
        if not isinstance(streams, Mapping) or not streams:
            raise DataError(f"LoadLocalizationStreams: streams must be a non-empty mapping {{name: width}}, got "
                            f"{streams!r}")
        for name, width in streams.items():
            if not isinstance(name, str) or not name or os.sep in name:
                raise DataError(f"LoadLocalizationStreams: stream name {name!r} must be a folder name")
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise DataError(f"LoadLocalizationStreams: stream {name!r} width must be a positive int, got {width!r}")
        self.streams = dict(streams)

    def __call__(self, results: dict) -> dict:
        if "feature_path" not in results:
            raise KeyError("LoadLocalizationStreams needs results['feature_path']; is the dataset an "
                           "ActivityNetFeatureDataset?")
        folder, name = os.path.split(str(results["feature_path"]))
        where = f"video {results.get('video_name', '?')}"
        parts = []
        for stream, width in self.streams.items():
            path = os.path.join(folder, stream, name)
            feat = read_localization_feature(path, f"{where} ({stream} stream)")
            if feat.shape[1] != width:
                raise DataError(f"{where}: {stream} feature file {path} has {feat.shape[1]} columns (shape "
                                f"{tuple(feat.shape)}, T x C), but the stream's width is {width}")
            parts.append(feat)
        length = min(p.shape[0] for p in parts)
        results["features"] = np.concatenate([p[:length] for p in parts], axis=1)
        results["feature_length"] = int(length)
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(streams={self.streams})"
