"""The model-mode check shared by the per-task config checks: a finite loss that backpropagates in train mode,
then predictions and raw outputs in eval mode (importable: tests/ is on pythonpath)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def loss_then_predict(model: torch.nn.Module, make_batch: Callable[[], dict]) -> tuple[list, object]:
    """Run ``model`` on ``make_batch()`` in 'loss' mode (asserting a finite, backpropagated total), then in
    'predict' and 'tensor' mode without gradients; returns (predictions, raw outputs)."""
    model.train()
    data = model.data_preprocessor(make_batch(), training=True)
    losses = model(**data, mode="loss")
    total = sum(v for k, v in losses.items() if "loss" in k)
    assert torch.isfinite(total)
    total.backward()
    model.eval()
    with torch.no_grad():
        data = model.data_preprocessor(make_batch(), training=False)
        return model(**data, mode="predict"), model(data["inputs"], mode="tensor")
