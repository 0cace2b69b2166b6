"""A tiny CNN classifier (mmengine's three forward modes through :class:`oars.models.task_model.TaskModel`) and the
module the export traces (softmax scores)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from extra_task.registry import MODELS
from oars.models.task_model import TaskModel


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


@MODELS.register_module()
class TinyShapeNet(TaskModel):
    """Three stride-2 conv blocks, global average pooling, a linear classifier.

    Modes: ``loss`` -> ``{'loss_cls'}``; ``predict`` -> the data samples with ``pred_score`` (softmax) and
    ``pred_label``; ``tensor`` -> logits [B, num_classes].
    """

    def __init__(self, num_classes: int = 3, channels: int = 8, data_preprocessor: dict | nn.Module | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = {"type": "ImageDataPreprocessor"}
        if isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.num_classes = int(num_classes)
        self.features = nn.Sequential(_block(3, channels), _block(channels, 2 * channels),
                                      _block(2 * channels, 4 * channels))
        self.head = nn.Linear(4 * channels, self.num_classes)

    def _forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(inputs).mean(dim=(2, 3)))

    def loss(self, inputs: torch.Tensor, data_samples: Any) -> dict[str, torch.Tensor]:
        logits = self._forward(inputs)
        target = torch.stack([s.gt_label for s in data_samples]).to(logits.device).long()
        return {"loss_cls": F.cross_entropy(logits, target)}

    def predict(self, inputs: torch.Tensor, data_samples: Any) -> list:
        scores = self._forward(inputs).softmax(dim=1)
        for sample, score in zip(data_samples, scores):
            sample.pred_score = score
            sample.pred_label = score.argmax()
        return list(data_samples)


class ScoresModule(nn.Module):
    """What the export traces: the normalised image batch -> softmax scores [B, num_classes]."""

    def __init__(self, model: TinyShapeNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model._forward(image).softmax(dim=1)
