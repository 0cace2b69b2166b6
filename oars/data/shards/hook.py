"""``ShardSamplerHook``: connects a training loader over :class:`~oars.data.shards.ShardDataset` to the loop, the
way mmengine connects a map-style sampler (``oars.data.samplers.shard_stream``): the epoch (``set_epoch``), the
resume fast-forward (``skip``), the run's seed and the loader's workers and batch size reach the stream."""

from __future__ import annotations

from mmengine.hooks import Hook

from oars.data.samplers.shard_stream import install_stream_sampler
from oars.registry import HOOKS


@HOOKS.register_module()
class ShardSamplerHook(Hook):
    """Install :class:`~oars.data.samplers.shard_stream.ShardStreamSampler` on the training loader (if its dataset
    is a shard stream) before training starts, after a resume has restored the counters and the seed."""

    priority = "VERY_HIGH"  # before DistSamplerSeedHook (NORMAL) calls set_epoch in before_train_epoch

    def before_train(self, runner) -> None:
        loop = runner.train_loop
        loader = loop.dataloader
        if install_stream_sampler(loader, getattr(runner, "seed", None)) is None:
            return
        if hasattr(loop, "_max_epochs") and type(loop).__name__ == "EpochBasedTrainLoop":
            loop._max_iters = loop._max_epochs * len(loader)  # the length now counts the workers' shares
