"""What every recognizer head shares: the classifier's losses, view averaging and the predictions.

A head maps backbone features to one score row per view (``forward``); the recognizer then calls
:meth:`BaseHead.loss` (training, each view its own sample) or :meth:`BaseHead.average_views` /
:meth:`BaseHead.predict` (testing: the V views of a video folded into one score, ``average_clips``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from oars.models.building import check_num_classes
from oars.models.utils import labels_out_of_range
from video.registry import MODELS
from video.structures import ActionDataSample

AVERAGE_CLIPS = ("prob", "score", None)


class BaseHead(nn.Module):
    """Classifier base: dropout + ``fc_cls`` (Linear, normal(0, ``init_std``) weights, zero bias), a loss, and
    view averaging.

    Args:
        num_classes: classes (given by the recognizer, which holds it once).
        in_channels: feature channels (the recognizer passes its backbone's ``out_channels``).
        loss_cls: loss config; default ``CrossEntropyLoss`` (``BCELossWithLogits`` when ``multi_label``).
        multi_label: per-class sigmoid scores and multi-hot [C] ``gt_label`` instead of softmax and class ids.
        average_clips: how the V test views of a video become one score: ``'prob'`` mean of the softmax (sigmoid
            when ``multi_label``) of each view, ``'score'`` mean of the logits, ``None`` no averaging (tensor
            mode then returns [B, V, C]; predict needs V == 1).
        dropout_ratio: dropout before ``fc_cls`` (0: none).
        init_std: standard deviation of ``fc_cls``'s initial weights.
    """

    def __init__(self, num_classes: int, in_channels: int, loss_cls: dict[str, Any] | nn.Module | None = None,
                 multi_label: bool = False, average_clips: str | None = "prob", dropout_ratio: float = 0.5,
                 init_std: float = 0.01) -> None:
        super().__init__()
        name = type(self).__name__
        check_num_classes(name, num_classes)
        if not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"{name}: in_channels must be a positive int, got {in_channels!r}")
        if average_clips not in AVERAGE_CLIPS:
            raise ValueError(f"{name}: average_clips={average_clips!r} is not supported; accepted: "
                             f"{list(AVERAGE_CLIPS)}")
        if not 0.0 <= dropout_ratio < 1.0:
            raise ValueError(f"{name}: dropout_ratio must be in [0, 1), got {dropout_ratio!r}")
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.multi_label = bool(multi_label)
        self.average_clips = average_clips
        self.init_std = float(init_std)
        if loss_cls is None:
            loss_cls = dict(type="BCELossWithLogits" if self.multi_label else "CrossEntropyLoss")
        self.loss_cls = loss_cls if isinstance(loss_cls, nn.Module) else MODELS.build(loss_cls)
        self.dropout = nn.Dropout(dropout_ratio) if dropout_ratio > 0 else nn.Identity()
        self.fc_cls = nn.Linear(in_channels, num_classes)
        nn.init.normal_(self.fc_cls.weight, 0.0, self.init_std)
        nn.init.zeros_(self.fc_cls.bias)

    def forward(self, x: torch.Tensor, num_segs: int = 1) -> torch.Tensor:
        """Features of N = B*V views -> logits float [N, num_classes]."""
        raise NotImplementedError

    # ------------------------------------------------------------------ training
    def gt_labels(self, data_samples: Sequence[ActionDataSample]) -> torch.Tensor:
        """Labels of B samples: long [B] class ids, or float [B, C] multi-hot when ``multi_label``."""
        name = type(self).__name__
        labels = []
        for i, sample in enumerate(data_samples):
            where = sample.metainfo.get("filename", f"sample {i}")
            if "gt_label" not in sample:
                raise ValueError(f"{name}: {where} has no gt_label, needed for mode='loss'")
            gt = sample.gt_label
            if self.multi_label and (gt.dim() != 1 or gt.numel() != self.num_classes or not gt.is_floating_point()):
                raise ValueError(f"{name}: multi_label needs gt_label as a multi-hot float [{self.num_classes}], got "
                                 f"{gt.dtype} {tuple(gt.shape)} for {where} (set multi_label on the dataset too)")
            if not self.multi_label and (gt.numel() != 1 or gt.is_floating_point()):
                raise ValueError(f"{name}: single-label gt_label must be a long [1] class id, got {gt.dtype} "
                                 f"{tuple(gt.shape)} for {where} (multi-hot labels need multi_label: true)")
            labels.append(gt.reshape(-1))
        if not self.multi_label:
            stacked = torch.cat(labels)
            if labels_out_of_range(stacked, self.num_classes,
                                   f"{name}: a gt_label is out of range for num_classes={self.num_classes}"):
                bad = (stacked < 0) | (stacked >= self.num_classes)
                raise ValueError(f"{name}: gt_label {stacked[bad].tolist()} out of range for num_classes="
                                 f"{self.num_classes}")
            return stacked
        return torch.stack(labels)

    def loss(self, scores: torch.Tensor, data_samples: Sequence[ActionDataSample]) -> dict[str, torch.Tensor]:
        """``scores`` float [B*V, C] (views of one sample adjacent) -> ``{loss_name: loss, 'top1_acc': ...}``.

        Each view is trained as its own sample (its video's label repeated V times).
        """
        if not data_samples:
            raise ValueError(f"{type(self).__name__}: mode='loss' needs data_samples carrying gt_label")
        labels = self.gt_labels(data_samples).to(scores.device)
        if scores.shape[0] % labels.shape[0]:
            raise ValueError(f"{type(self).__name__}: {scores.shape[0]} score rows for {labels.shape[0]} samples")
        labels = labels.repeat_interleave(scores.shape[0] // labels.shape[0], dim=0)
        losses = {self.loss_cls.loss_name: self.loss_cls(scores, labels)}
        if not self.multi_label:  # logged, not summed: mmengine sums only keys that contain 'loss'
            losses["top1_acc"] = (scores.detach().argmax(1) == labels).float().mean()
        return losses

    # ------------------------------------------------------------------ testing
    def activate(self, scores: torch.Tensor) -> torch.Tensor:
        """Logits -> class probabilities along the last axis (softmax, or sigmoid when ``multi_label``)."""
        return scores.sigmoid() if self.multi_label else F.softmax(scores, dim=-1)

    def average_views(self, scores: torch.Tensor, num_views: int) -> torch.Tensor:
        """float [B*V, C] per-view logits -> [B, C] (``prob``: mean probabilities, ``score``: mean logits) or
        [B, V, C] logits (``average_clips=None``). This is what ``mode='tensor'`` returns (and exports)."""
        if scores.shape[0] % num_views:
            raise ValueError(f"{type(self).__name__}: {scores.shape[0]} score rows is not a multiple of "
                             f"{num_views} views")
        per_view = scores.reshape(-1, num_views, scores.shape[-1])
        if self.average_clips is None:
            return per_view
        if self.average_clips == "prob":
            return self.activate(per_view).mean(dim=1)
        return per_view.mean(dim=1)

    def predict(self, scores: torch.Tensor, num_views: int,
                data_samples: Sequence[ActionDataSample]) -> list[ActionDataSample]:
        """Per-view logits float [B*V, C] -> each sample's ``pred_score`` float [C] (probabilities) and
        ``pred_label`` long [1] (its argmax)."""
        averaged = self.average_views(scores, num_views)
        if self.average_clips is None:
            if num_views != 1:
                raise ValueError(f"{type(self).__name__}: average_clips=None keeps the {num_views} views apart; "
                                 "predict needs one score per video: set average_clips to 'prob' or 'score'")
            averaged = averaged[:, 0]
        probs = averaged if self.average_clips == "prob" else self.activate(averaged)
        if len(data_samples) != probs.shape[0]:
            raise ValueError(f"{type(self).__name__}: {probs.shape[0]} videos but {len(data_samples)} data samples")
        for sample, prob in zip(data_samples, probs):
            sample.pred_score = prob
            sample.pred_label = prob.argmax(dim=0, keepdim=True)
        return list(data_samples)

    def extra_repr(self) -> str:
        return (f"num_classes={self.num_classes}, in_channels={self.in_channels}, multi_label={self.multi_label}, "
                f"average_clips={self.average_clips!r}")
