"""What a registered data set's scan reads (:func:`oars.studio.datasets.scan_dataset`): each chosen sample through
the split's pipeline for its labels (class counts, sizes, one grid entry per sample), from a map-style dataset or
from shards.

Shards have no random access: they are read shard by shard, once, the check and the labels together, and a shard
holding none of the chosen stream positions is not read at all; each grid entry keeps its shard and key so that its
picture can be drawn later.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from oars.errors import OarsError


def count_labels(packed: Any, entry_out: dict, counts: list[int], result: dict) -> None:
    """Add one packed sample's labels to the counts and sizes of ``result`` and to its own entry."""
    from oars.studio.sample_stats import sample_labels

    ids, kind, sizes = sample_labels(packed)
    entry_out["classes"] = sorted(set(ids))
    for c in ids:
        if 0 <= c < len(counts):
            counts[c] += 1
    if kind:
        result["size_kind"] = kind
        result["sizes"] += sizes


def dataset_reads(dataset: Any, indices: list[int], result: dict) -> Iterator[tuple[dict, Any]]:
    """``(sample entry, packed sample or None)`` of each index of a map-style dataset, through its pipeline."""
    from oars.data.dataset import sample_files

    bad_files = {p["files"]: p["reason"] for p in result["problems"]}
    for i in indices:
        try:
            info = dataset.get_data_info(i)
        except Exception as err:  # noqa: BLE001 - recorded per sample
            yield {"files": f"sample {i}", "classes": [], "problem": str(err), "index": i}, None
            continue
        files = " + ".join(sample_files(info)) or f"sample {i}"
        entry_out = {"files": files, "classes": [], "problem": bad_files.get(files), "index": i}
        try:
            packed = dataset.pipeline(copy.deepcopy(info))
        except Exception as err:  # noqa: BLE001 - the same failure the check recorded (or a new one)
            entry_out["problem"] = entry_out["problem"] or f"{type(err).__name__}: {err}"
            packed = None
        yield entry_out, packed


def shard_reads(dataset: Any, indices: list[int], result: dict) -> Iterator[tuple[dict, Any]]:
    """``(sample entry, packed sample or None)`` of the stream positions ``indices`` of a ``ShardDataset``, read
    shard by shard in order (a shard holding none of them is not read); a shard that cannot be read (truncated,
    missing) is one problem naming it, and the next shard is read. A sample that fails its pipeline is a problem too
    (``result["problems"]``), as the check reports it for other datasets."""
    from oars.data.shards.reader import iter_shard

    wanted = set(indices)
    start = 0
    for name, count in zip(dataset.index.shards, dataset.index.counts):
        url = dataset.index.url(name)
        if not any(start <= i < start + count for i in wanted):
            start += count
            continue
        position = start
        try:
            for key, members in iter_shard(url, count):
                if position in wanted:
                    yield _shard_sample(dataset, name, key, members, position, result)
                position += 1
        except OarsError as err:
            result["problems"].append({"files": url, "reason": str(err)})
        start += count


def _shard_sample(dataset: Any, shard: str, key: str, members: dict, position: int, result: dict) -> tuple[dict, Any]:
    files = f"{dataset.index.url(shard)}/{key}"
    entry_out = {"files": files, "classes": [], "problem": None, "index": position, "shard": shard, "key": key}
    try:
        packed = dataset.prepare(shard, key, members)
    except Exception as err:  # noqa: BLE001 - recorded per sample, as the check records it
        entry_out["problem"] = str(err) if isinstance(err, OarsError) else f"{type(err).__name__}: {err}"
        result["problems"].append({"files": files, "reason": entry_out["problem"]})
        packed = None
    return entry_out, packed
