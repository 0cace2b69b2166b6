"""The compression runs: ``tools/compress.py --method prune|auto-prune|sensitivity|ptq|qat|distill`` end to end,
above the primitives of :mod:`oars.compress` (pruning of a module, QAT model surgery, distillation losses and model,
measurement, the table).

- :mod:`.methods`: the registry of methods by name (:data:`METHODS`, :func:`register_method`), :func:`compress`
  (run one and record its row) and :func:`record`;
- :mod:`.auto_prune` (search per-group prune ratios under a FLOPs or latency budget) and :mod:`.sensitivity`
  (metric vs prune ratio per layer group), both scored by :mod:`.proxy_score`;
- :mod:`.prune`, :mod:`.ptq`, :mod:`.qat` (+ :mod:`.qat_export`), :mod:`.distill`: each method's run (load the
  config and checkpoint, train through the runner, export, evaluate, write the variant's folder);
- :mod:`.variants`: a variant's table row (measured from a config + checkpoint, or from a run's record);
- :mod:`.shared`: what the training methods share (a resumable fine-tuning, a reused export, the run's metrics).
"""

from __future__ import annotations

from .methods import METHODS, CompressMethod, Runner, compress, record, register_method

__all__ = ["METHODS", "CompressMethod", "Runner", "compress", "record", "register_method"]
