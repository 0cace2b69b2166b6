"""The sampler of a shard stream: how mmengine's loops reach an ``IterableDataset`` the way they reach a map-style
sampler.

A DataLoader over an ``IterableDataset`` takes no sampler (it makes its own ``_InfiniteConstantSampler``), so
mmengine's ``DistSamplerSeedHook`` (``sampler.set_epoch``) and its resume fast-forward (``sampler.skip``, found as
``dataloader.sampler``) find nothing to call, and a resumed run would start the stream over. This sampler is put in
the place of that one on the built loader (``ShardSamplerHook``): it yields what torch's does (``None`` forever:
an iterable dataset ignores indices) and passes ``set_epoch`` / ``skip`` to the dataset, so the stream follows
the same contract as ``DefaultSampler``, ``InfiniteSampler`` and ``ClassAwareSampler``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data.dataloader import _InfiniteConstantSampler


class ShardStreamSampler(_InfiniteConstantSampler):
    """``_InfiniteConstantSampler`` that forwards ``set_epoch`` and ``skip`` to ``dataset``.

    Args:
        dataset: the stream (``set_epoch(epoch)``, ``skip(num_samples)``).
    """

    def __init__(self, dataset: Any) -> None:
        super().__init__()
        self.dataset = dataset

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None

    def set_epoch(self, epoch: int) -> None:
        """The dataset reads epoch ``epoch`` next."""
        self.dataset.set_epoch(epoch)

    def skip(self, num_samples: int) -> None:
        """The dataset's next iteration starts after ``num_samples`` samples of this rank."""
        self.dataset.skip(num_samples)


def install_stream_sampler(loader: Any, seed: int | None = None) -> ShardStreamSampler | None:
    """Put a :class:`ShardStreamSampler` in ``loader.sampler`` when its dataset is a stream with ``set_epoch`` and
    ``skip`` (and ``set_loader``: told the loader's workers, batch size and ``seed``); None otherwise.

    Why ``object.__setattr__``: DataLoader refuses to have ``sampler`` reassigned after construction, because its
    iterator would draw from it; an iterable dataset's iterator draws from ``batch_sampler``, which keeps torch's
    sampler, so only mmengine's lookups see this one.
    """
    dataset = getattr(loader, "dataset", None)
    if not all(callable(getattr(dataset, name, None)) for name in ("set_epoch", "skip", "set_loader")):
        return None
    dataset.set_loader(loader.num_workers, loader.batch_size or 1, seed)
    sampler = ShardStreamSampler(dataset)
    object.__setattr__(loader, "sampler", sampler)
    len(loader)  # the loader caches the iterable's length for its length warning: refresh it
    return sampler
