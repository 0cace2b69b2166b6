"""Streams for image models: a video file, a URL FFmpeg opens or a camera as ``oars-infer -i``, predicted frame by
frame into results.jsonl and an annotated video (torch-free); with ``--track`` for detectors (ByteTrack ids,
:mod:`oars_deploy.track`), and window by window for video classifiers (``--window``, :mod:`.windows`)."""

from oars_deploy.streams.source import FrameStream, StreamFrame, StreamSource, stream_source
from oars_deploy.streams.writer import VideoWriter, available_codec

__all__ = ["FrameStream", "StreamFrame", "StreamSource", "VideoWriter", "available_codec", "stream_source"]
