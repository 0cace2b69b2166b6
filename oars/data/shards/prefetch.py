"""Read a worker's shards ahead of its decoding, in one background thread of the worker, within a byte budget.

Why: without it a DataLoader worker waits on the network for each shard (one request, or one per block) and only
then decodes its samples, so every wait adds to the epoch; on a bucket the waits are most of the difference from
local files. A thread that reads the next samples (the next shard) while the worker decodes the current ones
overlaps the two: waiting on a socket releases the GIL, so the decoding goes on meanwhile.

Rules:
- The order is the order of the stream it wraps: the samples, and an error at its place after the samples that
  came before it (a missing or truncated shard still raises the one-line message that names its URL, when the
  consumer gets there).
- Bounded: the thread holds at most ``budget`` bytes of samples not yet taken (a single larger sample is let
  through alone), so memory never grows with the data set.
- No leaked thread: when the consumer stops (exhausted, an error, or the iterator closed or dropped) the thread is
  told to stop and joined (it finishes the one read it may be in first).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: the default byte budget of a worker's read-ahead (``ShardDataset(prefetch_bytes=...)``)
DEFAULT_PREFETCH_BYTES = 128 * 2**20
THREAD_NAME = "oars-shard-prefetch"


def prefetched(items: Iterator[T], budget: int, size: Callable[[T], int]) -> Iterator[T]:
    """``items``, produced by a background thread that stays at most ``budget`` bytes (by ``size(item)``) ahead.

    Args:
        items: the stream to read ahead (its reads run in the thread); closed by the thread when it stops.
        budget: bytes of items held for the consumer at most (``<= 0``: no thread, ``items`` as they are).
        size: the bytes an item holds.

    Returns:
        The items in the order ``items`` gives them; an exception ``items`` raised is raised here, after the
        items that came before it.
    """
    if budget <= 0:
        yield from items
        return
    cond = threading.Condition()
    held: collections.deque[tuple[T, int]] = collections.deque()
    state = {"bytes": 0, "stop": False, "done": False, "error": None}

    def fill() -> None:
        try:
            for item in items:
                n = size(item)
                with cond:
                    while not state["stop"] and held and state["bytes"] + n > budget:
                        cond.wait()
                    if state["stop"]:
                        return
                    held.append((item, n))
                    state["bytes"] += n
                    cond.notify_all()
        except BaseException as err:  # noqa: BLE001 - handed to the consumer, raised there in order
            state["error"] = err
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
            with cond:
                state["done"] = True
                cond.notify_all()

    thread = threading.Thread(target=fill, name=THREAD_NAME, daemon=True)
    thread.start()
    try:
        while True:
            with cond:
                while not held and not state["done"]:
                    cond.wait()
                if held:
                    item, n = held.popleft()
                    state["bytes"] -= n
                    cond.notify_all()
                elif state["error"] is not None:
                    raise state["error"]
                else:
                    return
            yield item
    finally:
        with cond:
            state["stop"] = True
            cond.notify_all()
        thread.join()
