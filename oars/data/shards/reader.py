"""Read one shard as a stream of samples: ``(key, {member suffix: bytes})`` in the order written, through
``oars.data.storage`` (a local file or a URL, read front to back: nothing is seeked, so object storage streams).
A shard whose size (from the index) is at most ``whole_below`` bytes is read whole instead (``cat_file``: on s3fs a
size lookup, then one GET of the object, or parallel ranged GETs above its 50 MiB block), then parsed from memory.

Every failure is one line naming the shard and the member: a truncated or corrupt tar, a member without its
sample's JSON record, fewer samples than the index says.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from oars.data import storage
from oars.data.shards.codec import RECORD_EXT
from oars.errors import DataError

REMAKE = "remake the shards with tools/make_shards.py (--overwrite)"


def split_member(name: str) -> tuple[str, str]:
    """WebDataset's grouping: ``dir/000012.img_path.png`` -> (``dir/000012``, ``img_path.png``)."""
    folder, _, base = name.rpartition("/")
    key, _, suffix = base.partition(".")
    return (f"{folder}/{key}" if folder else key), suffix


@contextmanager
def _shard_file(url: str, size: int | None, whole_below: int) -> Iterator[IO[bytes]]:
    """The shard as a file: its bytes in memory when ``size`` is known and at most ``whole_below``, else the
    stream (storage errors name the URL either way)."""
    if size is not None and 0 <= size <= whole_below:
        yield io.BytesIO(storage.read_bytes(url))
        return
    with storage.open_file(url, "rb") as f:
        yield f


def iter_shard(url: str, expected: int | None = None, size: int | None = None,
               whole_below: int = 0) -> Iterator[tuple[str, dict[str, bytes]]]:
    """The samples of the shard ``url`` in order.

    Args:
        url: the shard (a local path or a URL).
        expected: the sample count the index gives (None: not checked).
        size: the shard's bytes as the index gives them (None: unknown, streamed).
        whole_below: read a shard of at most this many bytes whole, in one call (0: always streamed).

    Raises:
        DataError: a truncated or corrupt shard (naming the shard and the last member read), a sample without its
            ``.json`` record, or a count that differs from ``expected``.
    """
    count = 0
    last = "(its first member)"
    key: str | None = None
    members: dict[str, bytes] = {}

    def finished() -> tuple[str, dict[str, bytes]]:
        if RECORD_EXT not in members:
            raise DataError(f"{url}: sample {key!r} has no {key}.{RECORD_EXT} record (members: "
                            f"{sorted(members)}); not a shard written by tools/make_shards.py; {REMAKE}")
        return key, members

    with _shard_file(url, size, whole_below) as f:
        try:
            with tarfile.open(fileobj=f, mode="r|") as tar:
                for info in tar:
                    if not info.isfile():
                        continue
                    name_key, suffix = split_member(info.name)
                    data = tar.extractfile(info).read()
                    if len(data) != info.size:
                        raise tarfile.ReadError("unexpected end of data")
                    last = info.name
                    if name_key != key and key is not None:
                        yield finished()
                        count += 1
                        members = {}
                    key = name_key
                    members[suffix] = data
        except (tarfile.TarError, EOFError) as err:
            raise DataError(f"{url}: truncated or corrupt shard, at member {last} after {count} complete sample(s) "
                            f"({type(err).__name__}: {err}); {REMAKE}") from None
    if key is not None:
        yield finished()
        count += 1
    if expected is not None and count != expected:
        raise DataError(f"{url}: {count} sample(s) in the shard, its index.json says {expected} (a truncated or "
                        f"replaced shard, last member {last}); {REMAKE}")
