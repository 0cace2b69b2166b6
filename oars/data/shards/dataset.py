"""``ShardDataset``: one generic dataset that streams WebDataset shards written by ``tools/make_shards.py`` from a
local folder or a URL (``s3://``, ``gs://``, ``https://`` ... through ``oars.data.storage``) and feeds each sample
to the config's pipeline as the SAME data-info dict the source dataset gave its pipeline, so every task's
transforms run unchanged.

A config says::

    train_dataloader:
      sampler: null                     # an IterableDataset takes no sampler; ShardSamplerHook stands in
      dataset: {type: ShardDataset, shards: s3://bucket/shapes/train, shuffle_buffer: 64, pipeline: [...]}
    custom_hooks: [{type: ShardSamplerHook}]   # the epoch, the run's seed and resume reach the dataset

How the files of a sample are read: each file field of the data info (``img_path``, ``seg_map_path``, ``filename``
...) is set to ``<shard URL>/<key>.<field><ext>``; image and label-map members are decoded from memory by the core
loading transforms (:func:`oars.data.transforms.loading.files_in_memory`), any other member (a video) is written
to a scratch file of the process (FFmpeg seeks in a file) and removed after the sample's pipeline ran.

How the shards are read: each worker reads its shards ahead of its decoding in one background thread, within
``prefetch_bytes`` (:mod:`oars.data.shards.prefetch`: the network waits overlap the decoding), and a shard of at
most ``prefetch_bytes`` is fetched whole (:func:`oars.data.shards.reader.iter_shard`).

Which samples a process reads (ranks x DataLoader workers, shuffle buffer, epoch reshuffle, equal lengths) is
:mod:`oars.data.shards.plan`; resume: ``skip(num_samples)`` (mmengine's fast-forward contract, as the map-style
samplers) restarts at the same sample in the same order, nothing decoded on the way.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
from mmengine.dataset import Compose
from mmengine.dist import get_dist_info
from mmengine.registry import DefaultScope
from torch.utils.data import IterableDataset, get_worker_info

from oars.data import storage
from oars.data.shards import plan
from oars.data.shards.codec import IMAGE_EXTS, RECORD_EXT, decode_record
from oars.data.shards.index import MAKE_HINT, read_index
from oars.data.shards.prefetch import DEFAULT_PREFETCH_BYTES, prefetched
from oars.data.shards.reader import REMAKE, iter_shard
from oars.data.shards.writer import parse_size
from oars.data.transforms.loading import files_in_memory
from oars.errors import DataError, OarsError
from oars.registry import DATASETS, TRANSFORMS

#: scopes that belong to no task: a config in one of them may read any task's shards
NEUTRAL_SCOPES = (None, "", "oars", "mmengine")
_scratch: dict[int, str] = {}  # process id -> its scratch folder for non-image members


def _scratch_dir() -> str:
    pid = os.getpid()
    if pid not in _scratch:
        _scratch[pid] = tempfile.mkdtemp(prefix="oars-shard-members-")
    return _scratch[pid]


def _current_scope() -> str | None:
    current = DefaultScope.get_current_instance()
    return current.scope_name if current is not None else None


def build_pipeline(pipeline: Sequence[dict | Callable], scope: str | None) -> Compose:
    """The pipeline's transforms built from ``scope``'s registries (the task's transforms, found through the task
    registry as the Runner finds them), already-built ones kept."""
    if scope not in NEUTRAL_SCOPES:
        from oars.tasks import activate  # noqa: PLC0415 - imports the task's registries, by scope only

        activate(scope)
    with DefaultScope.overwrite_default_scope(scope):
        return Compose([TRANSFORMS.build(t) if isinstance(t, dict) else t for t in pipeline])


@DATASETS.register_module()
class ShardDataset(IterableDataset):
    """Stream the shards of ``shards`` through ``pipeline`` (see the module docstring and docs/data.md).

    Args:
        shards: the folder or URL ``tools/make_shards.py --out`` wrote (holding ``index.json``).
        pipeline: the transforms, as the source dataset's config lists them.
        shuffle: shuffle the shard order per epoch and pass samples through the buffer (default: not
            ``test_mode``).
        shuffle_buffer: samples held by the shuffle buffer (1: shard order only).
        seed: the seed of the shard order and the buffer (None: the run's seed, given by ``ShardSamplerHook``;
            0 without it).
        test_mode: evaluation: every sample exactly once, no shuffle, no repetition (one process: evaluation over
            shards does not run on several ranks).
        infinite: one endless stream of epochs 0, 1, 2 ... (iteration-based loops); else one epoch per iteration,
            chosen by :meth:`set_epoch`.
        storage_options: fsspec options for a URL ``shards`` (``oars.data.storage``: no credentials).
        prefetch_bytes: how far each worker reads ahead of its decoding, in bytes of samples (an int, or a size
            such as ``128MB``; default 128 MiB): a background thread of the worker reads the next samples and the
            next shard while the current ones are decoded, and a shard of at most this size is fetched whole.
            A worker holds up to about twice this (the read-ahead and the shard being split). 0: no thread,
            each shard streamed when its turn comes.
        rank, world_size: this process's rank and the number of ranks (None: from torch.distributed).
        lazy_init: mmengine's dataset argument (the config check builds datasets with it); the index is small and
            always read, so it changes nothing.

    Raises:
        DataFileNotFoundError / DataError: no index there, shards of another task than the config's
            ``default_scope``, bad arguments.
    """

    def __init__(self, shards: str, pipeline: Sequence[dict | Callable] = (), shuffle: bool | None = None,
                 shuffle_buffer: int = 1000, seed: int | None = None, test_mode: bool = False,
                 infinite: bool = False, storage_options: Mapping | None = None, rank: int | None = None,
                 world_size: int | None = None, lazy_init: bool = False,
                 prefetch_bytes: int | str = DEFAULT_PREFETCH_BYTES) -> None:
        super().__init__()
        if not isinstance(shards, str) or not shards:
            raise DataError(f"ShardDataset: shards must be the folder or URL tools/make_shards.py wrote, got "
                            f"{shards!r}")
        if not isinstance(shuffle_buffer, int) or shuffle_buffer < 1:
            raise DataError(f"ShardDataset: shuffle_buffer must be a positive number of samples, got "
                            f"{shuffle_buffer!r}")
        self.prefetch_bytes = _prefetch_bytes(prefetch_bytes)
        storage.register_options(shards.rstrip("/"), storage_options, "ShardDataset: storage_options")
        self.index = read_index(shards)
        scope = _current_scope()
        if scope not in NEUTRAL_SCOPES and self.index.scope not in NEUTRAL_SCOPES and scope != self.index.scope:
            raise DataError(f"{self.index.url('index.json')}: these shards were made from a {self.index.scope!r} "
                            f"dataset ({self.index.dataset_type}); this config's default_scope is {scope!r}: use "
                            f"shards made from a {scope!r} dataset; {MAKE_HINT}")
        self.scope = self.index.scope if self.index.scope not in NEUTRAL_SCOPES else scope
        self.pipeline = build_pipeline(pipeline, self.scope)
        self.test_mode = bool(test_mode)
        self.shuffle = (not self.test_mode) if shuffle is None else bool(shuffle)
        self.shuffle_buffer = shuffle_buffer
        self.seed = seed
        self.infinite = bool(infinite)
        default_rank, default_world = get_dist_info()
        self.rank = default_rank if rank is None else int(rank)
        self.world_size = default_world if world_size is None else int(world_size)
        if not 0 <= self.rank < self.world_size:
            raise DataError(f"ShardDataset: rank {self.rank} is not in [0, world_size={self.world_size})")
        if self.test_mode and (self.world_size > 1 or self.infinite):
            raise DataError("ShardDataset: test_mode (evaluation) reads every sample once in one process; run the "
                            f"evaluation over shards without torchrun (world_size {self.world_size}) and without "
                            "infinite")
        self.epoch = 0
        self.workers = 1  # the DataLoader's worker count (ShardSamplerHook: set_loader), for len()
        self.batch_size = 1
        self._skip = 0
        self._metainfo = dict(self.index.metainfo)
        for key, name in self.index.metainfo_files.items():  # e.g. the COCO json the detection metric reads
            self._metainfo[key] = storage.local_copy(self.index.url(name))

    @property
    def metainfo(self) -> dict:
        """The source dataset's metainfo (classes, palette, ...; files such as ``ann_file`` as local copies)."""
        return dict(self._metainfo)

    def set_loader(self, num_workers: int, batch_size: int, seed: int | None = None) -> None:
        """What the DataLoader does with this dataset: its workers (0: the main process, counted as one) and
        batch size, for ``len()`` and resume; the run's seed, used when the config gave none."""
        self.workers = max(1, int(num_workers))
        self.batch_size = max(1, int(batch_size))
        if self.seed is None and seed is not None:
            self.seed = int(seed)

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next (its shard order and buffer draws); mmengine's loops call it through the
        sampler ``ShardSamplerHook`` installs); a pending :meth:`skip` belongs to the previous epoch and is
        dropped."""
        if int(epoch) != self.epoch:
            self._skip = 0
        self.epoch = int(epoch)

    def skip(self, num_samples: int) -> None:
        """Start the next iteration after ``num_samples`` samples of this rank (mmengine's fast-forward on resume:
        a multiple of the batch size): within the current epoch, or (``infinite``) from the start of the stream.
        Nothing is decoded on the way."""
        if num_samples < 0:
            raise ValueError(f"ShardDataset.skip({num_samples}): expected a count >= 0")
        self._skip = int(num_samples)

    def _slots(self, workers: int) -> int:
        return self.world_size * workers

    def _target(self, workers: int) -> int | None:
        """Samples each slot yields per epoch (None: evaluation, no repetition)."""
        return None if self.test_mode else plan.slot_target(self.index.counts, self._slots(workers))

    def __len__(self) -> int:
        """Samples this rank yields per epoch: every sample for evaluation; ``workers x slot target`` in training."""
        target = self._target(self.workers)
        return self.index.total if target is None else self.workers * target

    def _raw(self, epoch: int, slot: int, slots: int) -> Iterator[tuple[str, str, dict[str, bytes]]]:
        """(shard, key, members) of ``slot`` in ``epoch``, after the shuffle buffer; nothing decoded."""
        seed = 0 if self.seed is None else self.seed
        num = len(self.index.shards)
        order = plan.shard_order(num, seed, epoch, self.shuffle)
        by_sample = not plan.split_by_shard(num, slots)

        sizes = self.index.sizes or [None] * num

        def stream() -> Iterator[tuple[str, str, dict[str, bytes]]]:
            position = 0
            for s in plan.slot_shards(order, slot, slots, num):
                name = self.index.shards[s]
                for key, members in iter_shard(self.index.url(name), self.index.counts[s], sizes[s],
                                               self.prefetch_bytes):
                    keep = not by_sample or position % slots == slot
                    position += 1
                    if keep:
                        yield name, key, members

        buffer = self.shuffle_buffer if self.shuffle else 1
        ahead = prefetched(stream(), self.prefetch_bytes, _sample_bytes)
        return plan.shuffled(ahead, buffer, np.random.default_rng([seed, epoch, slot]))

    def _slot_stream(self, slot: int, slots: int, workers: int, skip: int) -> Iterator[tuple[str, str, dict]]:
        target = self._target(workers)
        epoch = self.epoch
        if self.infinite and target:
            extra, skip = divmod(skip, target)
            epoch += extra
        while True:
            stream = plan.padded(lambda e=epoch: self._raw(e, slot, slots), target)
            yield from itertools.islice(stream, skip, None)
            skip = 0
            if not self.infinite:
                return
            epoch += 1

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        slots = self._slots(workers)
        batches_done = self._skip // self.batch_size
        in_rank = plan.resumed_slot(worker, workers, batches_done) if batches_done else worker
        skip = plan.batches_consumed(in_rank, workers, batches_done) * self.batch_size
        if info is None:
            self._skip = 0  # one resume only (worker copies are discarded with their workers)
        for shard, key, members in self._slot_stream(self.rank * workers + in_rank, slots, workers, skip):
            out = self.prepare(shard, key, members)
            if out is not None:
                yield out

    def data_info(self, shard: str, key: str, members: Mapping[str, bytes]) -> tuple[dict, dict[str, bytes], list]:
        """(the data info of a sample with its file fields set to their member paths, member path -> bytes for
        the loading transforms, scratch files written for the other members)."""
        where = f"{self.index.url(shard)}/{key}"
        if RECORD_EXT not in members:
            raise DataError(f"{where}: no .{RECORD_EXT} record; {REMAKE}")
        info, fields = decode_record(members[RECORD_EXT], f"{where}.{RECORD_EXT}")
        in_memory: dict[str, bytes] = {}
        scratch: list[str] = []
        for field, suffix in fields.items():
            data = members.get(suffix)
            if data is None:
                raise DataError(f"{where}.{suffix}: missing from the shard (the sample's record names it as "
                                f"{field}); {REMAKE}")
            ext = os.path.splitext(suffix)[1].lower()
            if ext in IMAGE_EXTS:
                path = f"{where}.{suffix}"
                in_memory[path] = data
            else:
                path = os.path.join(_scratch_dir(), f"{os.getpid()}-{os.path.basename(key)}.{suffix}")
                with open(path, "wb") as f:
                    f.write(data)
                scratch.append(path)
            info[field] = path
        return info, in_memory, scratch

    def prepare(self, shard: str, key: str, members: Mapping[str, bytes]) -> dict | None:
        """The sample through the pipeline (None: the pipeline dropped it)."""
        info, in_memory, scratch = self.data_info(shard, key, members)
        try:
            with files_in_memory(in_memory):
                return self.pipeline(info)
        finally:
            for path in scratch:
                os.remove(path)


def _prefetch_bytes(value: int | str) -> int:
    """``prefetch_bytes`` as bytes: an int >= 0 or a size such as ``128MB``."""
    if isinstance(value, bool) or not isinstance(value, int | str) or (isinstance(value, int) and value < 0):
        raise DataError(f"ShardDataset: prefetch_bytes must be 0 (no read-ahead) or a size such as 128MB or "
                        f"134217728, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return parse_size(value, "ShardDataset: prefetch_bytes")
    except OarsError as err:
        raise DataError(str(err)) from None


def _sample_bytes(item: tuple[str, str, Mapping[str, bytes]]) -> int:
    """The bytes a raw sample ``(shard, key, members)`` holds."""
    return sum(len(v) for v in item[2].values())


def remove_scratch() -> None:
    """Remove this process's scratch folder (tests; the OS temp folder otherwise)."""
    folder = _scratch.pop(os.getpid(), None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
