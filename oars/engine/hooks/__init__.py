"""Hooks the oars engine adds to mmengine's defaults."""

from .checkpoint_hook import AtomicCheckpointHook
from .compile_report_hook import CompileReportHook
from .config_hook import ConfigInCheckpointHook
from .nan_guard_hook import NaNGuardHook, NonFiniteLossError
from .rng_state_hook import RNGStateHook, capture_rng_state, restore_rng_state
from .throughput_hook import ThroughputHook

__all__ = ["AtomicCheckpointHook", "CompileReportHook", "ConfigInCheckpointHook", "NaNGuardHook", "NonFiniteLossError",
           "RNGStateHook", "ThroughputHook", "capture_rng_state", "restore_rng_state"]
