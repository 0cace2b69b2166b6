"""Parts a video head builds from config (registered in ``video.registry.TASK_UTILS``)."""

from .consensus import AvgConsensus, MaxConsensus

__all__ = ["AvgConsensus", "MaxConsensus"]
