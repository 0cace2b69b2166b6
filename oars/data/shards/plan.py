"""Which samples each (rank, worker) reads in an epoch, in which order: a pure function of the shard counts,
the seed, the epoch and the slot, so that every process computes its own share without talking to the others, a
resumed run computes the same one, and a test can check the union.

The rules (docs/data.md, "Shards"):

- Slots: rank ``r`` of ``R``, DataLoader worker ``w`` of ``W`` is slot ``r * W + w`` of ``R * W``.
- Shard order: the index's order, or (``shuffle``) a permutation drawn from ``(seed, epoch)``.
- With at least ``R * W`` shards, the shard at position ``i`` of that order goes to slot ``i % (R * W)``: each slot
  reads only its shards. With fewer shards, every slot reads all of them and keeps the samples at global positions
  ``j % (R * W) == slot`` (no loss, no overlap, more reading).
- Shuffle buffer (``shuffle``): a slot's stream passes through a buffer of ``buffer`` samples, drawn at random
  (the generator seeded by ``(seed, epoch, slot)``), as WebDataset's ``shuffle(n)``.
- Equal lengths (training): every slot yields exactly ``slot_target`` samples per epoch, repeating its own stream
  from the start when it runs short, so that every rank runs the same number of iterations (DDP would wait
  forever otherwise) and every worker the same number of batches (the DataLoader takes them in turn). The target
  holds for any shard order: the sum of the ``ceil(S / (R * W))`` largest shard counts (``ceil(N / (R * W))`` when
  samples are split). With equal shards and ``S`` a multiple of ``R * W`` nothing repeats. Evaluation does not pad.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def shard_order(num_shards: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """The shards' order in ``epoch``: the index's, or a permutation drawn from ``(seed, epoch)``."""
    if not shuffle:
        return list(range(num_shards))
    return [int(i) for i in np.random.default_rng([seed, epoch]).permutation(num_shards)]


def split_by_shard(num_shards: int, slots: int) -> bool:
    """Whether slots take whole shards (at least one shard per slot) rather than every ``slots``-th sample."""
    return num_shards >= slots


def slot_shards(order: Sequence[int], slot: int, slots: int, num_shards: int) -> list[int]:
    """The shards slot ``slot`` opens, in order (all of them when samples are split)."""
    return list(order[slot::slots]) if split_by_shard(num_shards, slots) else list(order)


def slot_count(counts: Sequence[int], order: Sequence[int], slot: int, slots: int) -> int:
    """Samples slot ``slot`` gets in an epoch of this order, before any repetition."""
    if split_by_shard(len(counts), slots):
        return int(sum(counts[i] for i in order[slot::slots]))
    total = int(sum(counts))
    return len(range(slot, total, slots))


def slot_target(counts: Sequence[int], slots: int) -> int:
    """Samples every slot yields per training epoch, whatever the shard order (see the module docstring)."""
    if split_by_shard(len(counts), slots):
        per_slot = math.ceil(len(counts) / slots)
        return int(sum(sorted(counts, reverse=True)[:per_slot]))
    return math.ceil(int(sum(counts)) / slots)


def shuffled(stream: Iterator[T], buffer: int, rng: np.random.Generator) -> Iterator[T]:
    """``stream`` through a shuffle buffer of ``buffer`` items (``buffer <= 1``: unchanged)."""
    if buffer <= 1:
        yield from stream
        return
    held: list[T] = []
    for item in stream:
        held.append(item)
        if len(held) >= buffer:
            j = int(rng.integers(len(held)))
            held[j], held[-1] = held[-1], held[j]
            yield held.pop()
    order = rng.permutation(len(held))
    for j in order:
        yield held[int(j)]


def padded(make_stream: Callable[[], Iterator[T]], target: int | None) -> Iterator[T]:
    """``make_stream()``'s items, then (``target`` given) its items again from the start until exactly ``target``
    have been yielded."""
    n = 0
    while True:
        empty = True
        for item in make_stream():
            empty = False
            if target is not None and n >= target:
                return
            yield item
            n += 1
        if target is None or n >= target or empty:
            return


def resumed_slot(worker: int, workers: int, batches_done: int) -> int:
    """The slot worker ``worker`` plays after a resume at ``batches_done`` batches of this rank: the DataLoader
    restarts its round-robin at worker 0, which must play the slot whose turn came next."""
    return (worker + batches_done) % workers


def batches_consumed(slot_in_rank: int, workers: int, batches_done: int) -> int:
    """Batches worker-slot ``slot_in_rank`` had produced when its rank had consumed ``batches_done`` (the
    DataLoader takes one batch from each worker in turn; every worker has the same number, see the padding)."""
    return batches_done // workers + (1 if slot_in_rank < batches_done % workers else 0)
