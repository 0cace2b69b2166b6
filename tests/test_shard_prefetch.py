"""The read-ahead of ``ShardDataset`` (oars/data/shards/prefetch.py): a worker's background thread reads its next
samples and shards while the current ones are decoded. It must change nothing but the timing: the same samples in
the same order (shuffle, worker slots, resume), within its byte budget, no thread left behind, and an error at its
place naming the shard's URL in one line; a small shard is fetched whole, a large one streamed."""

from __future__ import annotations

import itertools
import os
import threading
import time
import types

import pytest
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.registry import DefaultScope

import oars.data.shards.dataset as shard_dataset
import oars.data.shards.reader as shard_reader
from oars.config.check import load_checked_config
from oars.data.shards import ShardDataset
from oars.data.shards.prefetch import THREAD_NAME, prefetched
from oars.data.shards.writer import make_shards
from oars.errors import DataError, DataFileNotFoundError

SHARD_BYTES = 82_000  # two demo samples (128 px image + label map + record) per shard


@pytest.fixture(scope="module")
def shards(demo_data, tmp_path_factory):
    """The demo shapes' train split (16 samples) as shards of two samples, and the config."""
    cfg = load_checked_config(DEMO_CFG, demo_overrides(demo_data))
    out = tmp_path_factory.mktemp("prefetch_shards") / "train"
    make_shards(cfg, "train", str(out), SHARD_BYTES, progress=False)
    return cfg, str(out)


def _dataset(root: str, **kwargs) -> ShardDataset:
    with DefaultScope.overwrite_default_scope("segmentation"):
        return ShardDataset(root, **kwargs)


def _keys(ds: ShardDataset, monkeypatch, worker: int = 0, workers: int = 1, limit: int | None = None) -> list[str]:
    """The sample keys worker ``worker`` of ``workers`` yields (get_worker_info simulated in-process)."""
    info = types.SimpleNamespace(id=worker, num_workers=workers)
    monkeypatch.setattr(shard_dataset, "get_worker_info", lambda: info)
    try:
        return [os.path.basename(s["img_path"]).split(".")[0] for s in itertools.islice(ds, limit)]
    finally:
        monkeypatch.setattr(shard_dataset, "get_worker_info", lambda: None)


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.mark.parametrize("budget", [1, 50_000, 10**9], ids=["one-sample", "streamed", "whole-shards"])
def test_the_read_ahead_yields_the_samples_of_no_read_ahead_in_order(shards, monkeypatch, budget):
    _, root = shards
    for workers in (1, 2):
        for worker in range(workers):
            plain = _keys(_dataset(root, seed=4, shuffle_buffer=3, prefetch_bytes=0), monkeypatch, worker, workers)
            ahead = _keys(_dataset(root, seed=4, shuffle_buffer=3, prefetch_bytes=budget), monkeypatch, worker,
                          workers)
            assert ahead == plain and len(plain) == 16 // workers
    first = _keys(_dataset(root, seed=4, shuffle_buffer=3, prefetch_bytes=budget), monkeypatch)
    other = _keys(_dataset(root, seed=5, shuffle_buffer=3, prefetch_bytes=budget), monkeypatch)
    assert other != first  # the comparison can fail: another seed, another order
    assert not _prefetch_threads()


def test_a_resumed_stream_with_read_ahead_continues_where_it_stopped(shards, monkeypatch):
    _, root = shards
    whole = _dataset(root, seed=3, shuffle_buffer=3, infinite=True)
    whole.set_loader(1, 2)
    uninterrupted = _keys(whole, monkeypatch, limit=40)
    resumed = _dataset(root, seed=3, shuffle_buffer=3, infinite=True)
    resumed.set_loader(1, 2)
    resumed.skip(10)
    assert _keys(resumed, monkeypatch, limit=30) == uninterrupted[10:]
    assert uninterrupted[10:] != uninterrupted[:30]


def test_the_thread_ends_when_the_iterator_is_dropped_or_closed(shards):
    _, root = shards
    # a budget of one byte: the thread holds one sample and waits for the consumer, so it is surely still alive
    # after the first sample (with room for all 16 it may finish reading before the assertion runs)
    ds = _dataset(root, prefetch_bytes=1, shuffle_buffer=1)
    it = iter(ds)
    next(it)
    assert len(_prefetch_threads()) == 1  # the read-ahead runs while the stream is open
    del it
    assert not _prefetch_threads()
    it = iter(ds)
    next(it)
    it.close()
    assert not _prefetch_threads()
    assert len(list(ds)) == 16 and not _prefetch_threads()  # exhausted: ended too


def test_the_thread_stays_within_its_byte_budget():
    produced = []

    def items():
        for i in range(100):
            produced.append(i)
            yield i

    taken = []
    for item in prefetched(items(), budget=30, size=lambda _: 10):
        taken.append(item)
        time.sleep(0.002)  # the thread has time to run ahead as far as it may
        assert len(produced) - len(taken) <= 3 + 1  # 3 held for the consumer, 1 in the thread's hand
    assert taken == list(range(100))
    produced.clear()
    unbounded = prefetched(items(), budget=10**9, size=lambda _: 10)
    next(unbounded)
    time.sleep(0.2)
    assert len(produced) == 100  # the comparison can fail: a large budget reads everything ahead
    unbounded.close()


def test_an_error_comes_after_the_items_before_it():
    def items():
        yield from (1, 2, 3)
        raise DataError("memory://b/s/train-000001.tar: not found")

    taken = []
    with pytest.raises(DataError, match=r"^memory://b/s/train-000001\.tar: not found$"):
        for item in prefetched(items(), budget=100, size=lambda _: 1):
            taken.append(item)
    assert taken == [1, 2, 3] and not _prefetch_threads()


def test_a_missing_prefetched_shard_is_named_with_its_url_in_one_line(shards, monkeypatch):
    pytest.importorskip("fsspec")
    cfg, _ = shards
    url = "memory://oars-test-prefetch/train"
    make_shards(cfg, "train", url, SHARD_BYTES, progress=False)
    import fsspec

    fsspec.filesystem("memory").rm(f"{url}/train-000003.tar")
    ds = _dataset(url, test_mode=True)
    seen = []
    with pytest.raises(DataFileNotFoundError) as err:
        for sample in ds:
            seen.append(sample)
    message = str(err.value)
    assert message.startswith(f"{url}/train-000003.tar: not found") and "\n" not in message
    assert len(seen) == 6  # the three shards before it, in order
    assert not _prefetch_threads()


def test_a_small_shard_is_fetched_whole_and_a_large_one_streamed(shards, monkeypatch):
    _, root = shards
    whole = []
    real = shard_reader.storage.read_bytes
    monkeypatch.setattr(shard_reader.storage, "read_bytes", lambda url, *a: whole.append(url) or real(url, *a))
    assert len(list(_dataset(root, test_mode=True, prefetch_bytes=10**9))) == 16
    assert len(whole) == 8 and whole[0].endswith("train-000000.tar")  # one read per shard
    whole.clear()
    assert len(list(_dataset(root, test_mode=True, prefetch_bytes=50_000))) == 16  # shards above the budget
    assert whole == []


@pytest.mark.parametrize("value, message", [
    (-1, "ShardDataset: prefetch_bytes must be 0 (no read-ahead) or a size such as 128MB"),
    ("lots", "ShardDataset: prefetch_bytes 'lots': expected a positive size such as 1GB"),
    (True, "ShardDataset: prefetch_bytes must be 0"),
])
def test_a_bad_prefetch_bytes_is_refused(shards, value, message):
    _, root = shards
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _dataset(root, prefetch_bytes=value)
    assert _dataset(root, prefetch_bytes="64MB").prefetch_bytes == 64 * 10**6
