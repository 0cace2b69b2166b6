"""Snippets of one video from a single front-to-back decode, holding only the frames still to be used.

Every whole snippet samples the same relative frame indices (test-mode sampling of ``N`` frames is
deterministic), so the frames any later snippet needs are known in advance: frame ``i`` is kept only if
``i = k*S + r`` for a snippet ``k`` not yet emitted and a sampled offset ``r``, and dropped once the snippet that
needs it last has been emitted. At most the sampled frames of the ``ceil(N / S)`` snippets overlapping the current
frame are in memory -- never the whole video, and never more than a window of ``N`` frames.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from video.features.frames import VideoInfo, iter_frames
from video.features.snippets import SnippetPipeline, num_snippets


def snippet_frame_indices(pipeline: SnippetPipeline, path: str, info: VideoInfo, snippet: int,
                          stride: int) -> tuple[dict, np.ndarray]:
    """The sampler's output for the video's snippet window and every snippet's absolute frame indices.

    Returns:
        (``sampled``: :meth:`SnippetPipeline.relative_indices` of ``min(N, F)`` frames; int64 [T, K] absolute
        frame indices, row ``k`` = ``sampled['frame_inds'] + k*S``).
    """
    window = min(snippet, info.total_frames)
    sampled = pipeline.relative_indices(path, window)
    count = num_snippets(info.total_frames, snippet, stride)
    starts = np.arange(count, dtype=np.int64)[:, None] * stride
    return sampled, starts + np.asarray(sampled["frame_inds"], dtype=np.int64)[None, :]


def iter_snippets(pipeline: SnippetPipeline, path: str, info: VideoInfo, snippet: int,
                  stride: int) -> Iterator[dict]:
    """Each snippet's packed input, in order, decoding the file once.

    Args:
        pipeline: the recognizer's test pipeline around its decoding step.
        path: the video file; info: its :func:`~video.features.frames.probe`.
        snippet: ``N`` frames per snippet; stride: ``S`` frames between snippet starts.

    Yields:
        :meth:`SnippetPipeline.clip` dicts (``inputs`` uint8, ``data_samples``), snippet 0 first; ``T`` of them
        (:func:`~video.features.snippets.num_snippets`).

    Raises:
        DataError: the file cannot be decoded to its last needed frame, or is too short for the sampler.
    """
    sampled, indices = snippet_frame_indices(pipeline, path, info, snippet, stride)
    wanted: dict[int, int] = {}  # frame -> last snippet that needs it
    for k, row in enumerate(indices):
        for i in row.tolist():
            wanted[i] = k
    last_frame = int(indices.max())
    kept: dict[int, np.ndarray] = {}
    k = 0
    for pos, frame in enumerate(iter_frames(path, last_frame + 1)):
        if pos in wanted:
            kept[pos] = frame
        while k < len(indices) and pos >= int(indices[k].max()):
            row = indices[k].tolist()
            yield pipeline.clip(path, info.total_frames, sampled, k * stride, [kept[i] for i in row])
            for i in set(row):
                if wanted[i] == k:
                    del kept[i]
            k += 1
