"""The DataLoader side of the extractor: one video per worker at a time, its snippets sent in chunks.

Why an ``IterableDataset``: a long video gives thousands of snippets, so "one video per item" cannot mean one
array per video; each worker takes every ``num_workers``-th video, decodes it front to back
(:func:`~video.features.window.iter_snippets`) and yields :class:`Chunk` s of at most ``batch_size`` snippet
inputs, so memory stays at a few chunks per worker whatever the video's length. A video that cannot be read
yields one chunk carrying the error (a ``UserError``'s message) instead of raising, so the others go on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from oars_deploy.errors import UserError
from video.features.frames import VideoInfo, probe
from video.features.snippets import SnippetPipeline
from video.features.window import iter_snippets


@dataclass
class Chunk:
    """Consecutive snippets of one video (or its failure).

    Attributes:
        video_id: the output name (file stem). path: the video file.
        info: the video's frame count, rate and duration (None when it could not be opened).
        first: index of the first snippet in ``inputs``.
        inputs: uint8 tensors, one per snippet, as ``PackActionInputs`` gives them ([V*T, 3, H, W] or
            [V, 3, T, H, W]).
        last: True on the video's final chunk (also on an error chunk).
        error: why the video could not be read, or None.
    """

    video_id: str
    path: str
    info: VideoInfo | None = None
    first: int = 0
    inputs: list[torch.Tensor] = field(default_factory=list)
    last: bool = False
    error: str | None = None


class SnippetChunks(IterableDataset):
    """Chunks of snippet inputs of ``videos``, split between the DataLoader workers by video.

    Args:
        videos: (video_id, path) pairs.
        pipeline: the recognizer's test pipeline around its decoding step.
        snippet: ``N``; stride: ``S``.
        batch_size: snippets per chunk (the model's batch).
    """

    def __init__(self, videos: Sequence[tuple[str, str]], pipeline: SnippetPipeline, snippet: int, stride: int,
                 batch_size: int) -> None:
        super().__init__()
        self.videos = list(videos)
        self.pipeline = pipeline
        self.snippet = int(snippet)
        self.stride = int(stride)
        self.batch_size = int(batch_size)

    def __iter__(self) -> Iterator[Chunk]:
        worker = get_worker_info()
        share = self.videos if worker is None else self.videos[worker.id::worker.num_workers]
        for video_id, path in share:
            yield from self.video_chunks(video_id, path)

    def video_chunks(self, video_id: str, path: str) -> Iterator[Chunk]:
        """One video's chunks, the last marked ``last``; a ``UserError`` becomes one error chunk (what was
        already yielded of that video is then to be discarded)."""
        try:
            info = probe(path)
            chunk = Chunk(video_id, path, info)
            for packed in iter_snippets(self.pipeline, path, info, self.snippet, self.stride):
                if len(chunk.inputs) == self.batch_size:
                    yield chunk
                    chunk = Chunk(video_id, path, info, first=chunk.first + len(chunk.inputs))
                chunk.inputs.append(packed["inputs"])
        except UserError as err:
            yield Chunk(video_id, path, last=True, error=str(err))
            return
        chunk.last = True
        yield chunk


def _as_is(chunk: Chunk) -> Chunk:
    return chunk


def chunk_loader(dataset: SnippetChunks, workers: int) -> DataLoader:
    """A DataLoader over ``dataset`` that hands chunks over as they are (no collation), decoding in ``workers``
    processes (0: in this one)."""
    return DataLoader(dataset, batch_size=None, num_workers=int(workers), collate_fn=_as_is,
                      persistent_workers=False)
