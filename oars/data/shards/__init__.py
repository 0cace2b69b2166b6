"""WebDataset-format tar shards: ``tools/make_shards.py`` writes them from any registered dataset
(:mod:`oars.data.shards.writer`), :class:`ShardDataset` streams them back from a local folder or a URL
(docs/data.md, "Shards"). Importing this package registers ``ShardDataset`` (DATASETS) and ``ShardSamplerHook``
(HOOKS)."""

from oars.data.shards.dataset import ShardDataset
from oars.data.shards.hook import ShardSamplerHook
from oars.data.shards.index import INDEX_NAME, ShardIndex, read_index

__all__ = ["INDEX_NAME", "ShardDataset", "ShardIndex", "ShardSamplerHook", "read_index"]
