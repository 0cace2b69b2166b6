"""What every frame-feature model shares: the multi-label (sigmoid + BCE) or single-label (softmax + CE)
classification of its logits, as losses and as predictions in ``ActionDataSample``s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from video.structures import ActionDataSample

from .masking import check_feature_dims, split_batch


class FeatureHead(nn.Module):
    """Base class: ``forward(features, mask)`` maps a feature batch to logits [B, num_classes].

    Args:
        feature_dims: modality -> per-frame feature width, e.g. ``{rgb: 1024, audio: 128}`` (YouTube-8M).
        num_classes: classes C (set by ``FeatureRecognizer``; YouTube-8M has 3862).
        multi_label: True: independent sigmoid per class, loss = binary cross-entropy summed over classes and
            averaged over the batch (YouTube-8M's starter code and PaddleVideo's feature models);
            False: softmax over classes, loss = cross-entropy averaged over the batch.
        loss_weight: factor on the loss.
    """

    def __init__(self, feature_dims: Mapping[str, int], num_classes: int, multi_label: bool = True,
                 loss_weight: float = 1.0) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"{name}: num_classes={num_classes!r} must be a positive int")
        self.feature_dims = check_feature_dims(name, feature_dims)
        self.modalities = list(self.feature_dims)
        self.num_classes = num_classes
        self.multi_label = bool(multi_label)
        self.loss_weight = float(loss_weight)

    def forward(self, features: Mapping[str, Tensor], mask: Tensor | None = None) -> Tensor:
        """Logits FloatTensor [B, num_classes] of ``features`` (modality -> [B, T, D]) and ``mask`` ([B, T],
        True on valid frames; None: ``features['mask']`` or every frame valid)."""
        feats, mask = split_batch(type(self).__name__, features, self.feature_dims, mask)
        return self.forward_logits(feats, mask)

    def forward_logits(self, features: dict[str, Tensor], mask: Tensor) -> Tensor:
        """Subclasses: logits [B, C] of checked features (padded frames zeroed) and a bool mask [B, T]."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward_logits")

    def scores(self, logits: Tensor) -> Tensor:
        """Class scores [B, C]: per-class sigmoid (multi-label) or softmax over classes (single-label)."""
        return torch.sigmoid(logits) if self.multi_label else torch.softmax(logits, dim=1)

    def targets(self, data_samples: Sequence[ActionDataSample], device: torch.device) -> Tensor:
        """The batch's labels: FloatTensor [B, C] multi-hot (multi-label) or LongTensor [B] (single-label).

        Raises:
            ValueError: a sample without ``gt_label``, or labels of the other kind / width than the model's.
        """
        name = type(self).__name__
        if not data_samples or not all("gt_label" in s for s in data_samples):
            raise ValueError(f"{name}.loss needs data_samples that carry gt_label")
        labels = [s.gt_label for s in data_samples]
        if self.multi_label:
            if any(lab.dim() != 1 or lab.numel() != self.num_classes for lab in labels):
                shapes = sorted({tuple(lab.shape) for lab in labels})
                raise ValueError(f"{name}: multi_label=True needs gt_label multi-hot [num_classes={self.num_classes}]"
                                 f" per sample, got shapes {shapes} (set multi_label on the dataset too)")
            return torch.stack(labels).to(device=device, dtype=torch.float32)
        if any(lab.numel() != 1 or lab.is_floating_point() for lab in labels):
            raise ValueError(f"{name}: multi_label=False needs gt_label LongTensor [1] per sample, got "
                             f"{sorted({(tuple(lab.shape), str(lab.dtype)) for lab in labels})}")
        target = torch.cat([lab.reshape(1) for lab in labels]).to(device=device, dtype=torch.long)
        if bool(((target < 0) | (target >= self.num_classes)).any()):
            raise ValueError(f"{name}: gt_label values {target.tolist()} outside [0, {self.num_classes})")
        return target

    def loss(self, logits: Tensor, data_samples: Sequence[ActionDataSample]) -> dict[str, Tensor]:
        """``{'loss_cls': scalar}`` of ``logits`` [B, C] against the samples' ``gt_label``."""
        target = self.targets(data_samples, logits.device)
        if self.multi_label:
            loss = F.binary_cross_entropy_with_logits(logits, target, reduction="none").sum(1).mean()
        else:
            loss = F.cross_entropy(logits, target)
        return {"loss_cls": loss * self.loss_weight}

    def predict(self, logits: Tensor, data_samples: Sequence[ActionDataSample] | None) -> list[ActionDataSample]:
        """Fill ``pred_score`` [C] (see :meth:`scores`) and ``pred_label`` [1] (argmax) into the samples (new
        ones when None)."""
        scores = self.scores(logits.detach())
        if data_samples is None:
            data_samples = [ActionDataSample() for _ in range(scores.shape[0])]
        if len(data_samples) != scores.shape[0]:
            raise ValueError(f"{type(self).__name__}.predict: {len(data_samples)} data samples for a batch of "
                             f"{scores.shape[0]}")
        labels = scores.argmax(dim=1, keepdim=True)
        for sample, score, label in zip(data_samples, scores, labels):
            sample.pred_score = score
            sample.pred_label = label
        return list(data_samples)
