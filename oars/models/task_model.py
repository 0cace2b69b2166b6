"""The forward contract every task model shares (mmengine's three modes), written once."""

from __future__ import annotations

from typing import Any

import torch
from mmengine.model import BaseModel


class TaskModel(BaseModel):
    """``forward(inputs, data_samples, mode)`` dispatches to ``loss``, ``predict`` or ``_forward`` (the raw
    outputs, also what gets exported); subclasses implement those three."""

    def forward(self, inputs: torch.Tensor, data_samples: Any = None, mode: str = "tensor") -> Any:
        if mode == "loss":
            return self.loss(inputs, data_samples)
        if mode == "predict":
            return self.predict(inputs, data_samples)
        if mode == "tensor":
            return self._forward(inputs)
        raise ValueError(f"{type(self).__name__}.forward: mode must be 'loss', 'predict' or 'tensor', got {mode!r}")

    def loss(self, inputs: torch.Tensor, data_samples: Any) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def predict(self, inputs: torch.Tensor, data_samples: Any) -> list:
        raise NotImplementedError

    def _forward(self, inputs: torch.Tensor) -> Any:
        raise NotImplementedError
