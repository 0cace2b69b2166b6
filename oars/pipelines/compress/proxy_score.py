"""The cheap proxy that automatic pruning and sensitivity analysis score a pruned copy with (PaddleSlim's
sensitivity style): BatchNorm statistics re-estimated on a few training batches
(:func:`oars.compress.auto_prune.recalibrate_bn`), then the config's validation metric on the first few validation
batches, computed by the config's ``val_evaluator`` exactly as a validation does (``model.val_step`` then the
evaluator), only on fewer samples. The metric is the one the variant table reports (:func:`.variants.main_metric`).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import torch
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.registry import EVALUATOR, DefaultScope
from mmengine.runner import Runner
from torch import nn

from oars.compress.auto_prune import recalibrate_bn
from oars.errors import OarsError

from .variants import main_metric


def _loader(cfg: Config, key: str) -> Any:
    loader_cfg = copy.deepcopy(cfg.get(key))
    loader_cfg.update(num_workers=0, persistent_workers=False)
    loader_cfg.pop("worker_init_fn", None)
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        return Runner.build_dataloader(loader_cfg, seed=0)


def _evaluator(evaluator_cfg: Any) -> Evaluator:
    """The config's ``val_evaluator`` built as the runner builds it (a mapping with ``metrics`` is a whole
    evaluator; otherwise one metric or a list of them)."""
    cfg = copy.deepcopy(evaluator_cfg)
    if isinstance(cfg, dict) and "metrics" in cfg:
        cfg.setdefault("type", "Evaluator")
        return EVALUATOR.build(cfg)
    return Evaluator(cfg)


class ProxyScorer:
    """``scorer(model) -> float``: the validation metric of ``model`` (a pruned copy; its BatchNorm statistics are
    re-estimated in place) on ``val_batches`` validation batches after re-calibration on ``calib_batches`` training
    batches. The batches are read once and reused for every candidate, so candidates are compared on the same data.

    Args:
        cfg: the trained model's config (``train_dataloader``, ``val_dataloader``, ``val_evaluator``).
        model: the trained model (its data preprocessor prepares the calibration inputs once).
        calib_batches: training batches for re-calibration (0: none).
        val_batches: validation batches the metric is computed on.

    Raises:
        OarsError: the config has no validation loader or evaluator (named).
    """

    def __init__(self, cfg: Config, model: nn.Module, calib_batches: int, val_batches: int) -> None:
        for key in ("val_dataloader", "val_evaluator"):
            if not cfg.get(key):
                raise OarsError(f"{cfg.filename}: automatic pruning scores candidates on the validation set: the "
                                f"config needs {key}")
        self.cfg = cfg
        val = _loader(cfg, "val_dataloader")
        self.val = list(itertools.islice(val, val_batches))
        self.dataset_meta = getattr(val.dataset, "metainfo", None)
        self.samples = sum(len(b["data_samples"]) if isinstance(b, dict) and "data_samples" in b else 1
                           for b in self.val)
        self.calib: list[Any] = []
        if calib_batches and cfg.get("train_dataloader"):
            with torch.no_grad():
                self.calib = [model.data_preprocessor(b, False)["inputs"]
                              for b in itertools.islice(_loader(cfg, "train_dataloader"), calib_batches)]
        self.metric: str | None = None
        self.calls = 0

    def __call__(self, model: nn.Module) -> float:
        self.calls += 1
        recalibrate_bn(model, self.calib)
        with DefaultScope.overwrite_default_scope(self.cfg.get("default_scope")):
            evaluator = _evaluator(self.cfg.val_evaluator)
        if self.dataset_meta is not None:
            evaluator.dataset_meta = self.dataset_meta
        with torch.no_grad():
            for batch in self.val:
                evaluator.process(data_samples=model.val_step(batch), data_batch=batch)
        metrics = evaluator.evaluate(self.samples)
        self.metric, value = main_metric(self.cfg, metrics)
        if value is None:
            raise OarsError(f"{self.cfg.filename}: the val_evaluator returned no numeric metric ({metrics}); "
                            "automatic pruning needs one to score candidates")
        return float(value)


__all__ = ["ProxyScorer"]
