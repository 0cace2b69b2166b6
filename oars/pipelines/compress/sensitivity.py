"""``tools/compress.py --method sensitivity``: PaddleSlim's sensitivity analysis on a trained model. For each layer
group of automatic pruning (:func:`oars.compress.auto_prune.prunable_groups`) and each ratio of ``compress.ratios``
(0.1 ... 0.9), a copy with only that group pruned is scored by the proxy (:class:`.proxy_score.ProxyScorer`:
BatchNorm re-calibration, then the validation metric on a few batches); the unpruned model, scored the same way, is
the baseline. Writes ``DIR/sensitivity.json`` and ``DIR/sensitivity.png`` and adds one row of text to the variant
table (``variant: sensitivity``: the most sensitive group and its metric at ratio 0.5). Nothing is fine-tuned.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mmengine.config import Config

from oars.compress.auto_prune import prunable_groups, prune_groups
from oars.compress.auto_prune_options import auto_prune_settings
from oars.compress.measure import tensor_forward
from oars.compress.prune import check_supported, kept_layers, scope_layers
from oars.compress.sensitivity import most_sensitive, sensitivity_curves, write_sensitivity
from oars.engine.checkpoint import check_checkpoint_file

from .proxy_score import ProxyScorer
from .prune import model_and_batch


def run_sensitivity(cfg: Config, checkpoint: str, work_dir: str, options: dict[str, Any],
                    overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The curves (see the module docstring); returns the JSON's content with ``row`` (the table's row of text).

    Args:
        cfg: the loaded config of the trained model (``-o`` applied).
        checkpoint: its trained weights.
        work_dir: ``DIR`` (the files are written there).
        options: the merged ``compress`` options (``ratios``, ``scope``, ``calib_batches``, ``val_batches`` ...).
        overrides: unused (the model is not fine-tuned or exported).
    """
    settings = auto_prune_settings(options, cfg.filename, method="sensitivity")
    check_checkpoint_file(checkpoint)
    model, data = model_and_batch(cfg, checkpoint)
    inputs = data["inputs"][:1]
    prefixes, _ = scope_layers(model, settings.prune)
    check_supported(model, prefixes)
    kept = list(kept_layers(model, inputs, tensor_forward, prefixes))
    groups = prunable_groups(model, settings.prune, kept, settings.max_groups)
    scorer = ProxyScorer(cfg, model, settings.calib_batches, settings.val_batches)
    baseline = scorer(copy.deepcopy(model))

    def score(index: int, ratio: float) -> float:
        ratios = [ratio if i == index else 0.0 for i in range(len(groups))]
        return scorer(prune_groups(model, inputs, settings.prune, groups, ratios, kept))

    curves = sensitivity_curves([g.name for g in groups], settings.ratios, score)
    out = write_sensitivity(work_dir, curves, baseline, scorer.metric or "metric",
                            {g.name: list(g.layers) for g in groups})
    worst, drop = most_sensitive(curves, baseline)
    text = f"{scorer.metric} proxy {baseline:.4g} unpruned; most sensitive at ratio 0.5: {worst} (-{drop:.4g})"
    print(f"sensitivity: {text}; curves in sensitivity.json" + (" and sensitivity.png" if out["png"] else ""))
    row = {"variant": "sensitivity", "method": "sensitivity", "metric": text, "metric_value": None,
           "sensitivity": "sensitivity.json"}
    return {**out, "row": row}


__all__ = ["run_sensitivity"]
