"""The data sample that carries one video's (or feature sequence's) labels and predictions."""

from __future__ import annotations

import torch
from mmengine.structures import BaseDataElement


class ActionDataSample(BaseDataElement):
    """One clip's label and prediction.

    Fields:
        gt_label: single-label: LongTensor [1] (the class id); multi-label: FloatTensor [C] (multi-hot).
        pred_score: FloatTensor [C]: class probabilities (softmax, single-label) or per-class sigmoid
            scores (multi-label), already averaged over the test views.
        pred_label: LongTensor [1]: argmax of ``pred_score``.

    Metainfo keys used across the task: ``filename`` (video file, frame folder or feature file), ``frame_inds``
    (np.int64 [num_clips * clip_len], 0-based frame indices that were decoded), ``num_clips``, ``clip_len``,
    ``frame_interval``, ``total_frames``, ``num_crops``, ``img_shape`` (H, W after the pipeline),
    ``original_shape`` (H, W of the decoded frames), ``multi_label`` (bool).
    """

    def set_gt_label(self, value: int | list[int] | torch.Tensor, num_classes: int | None = None,
                     multi_label: bool = False) -> ActionDataSample:
        """Store ``value`` as ``gt_label``: an int -> LongTensor [1]; a list of class ids with ``multi_label``
        -> multi-hot FloatTensor [num_classes]."""
        if multi_label:
            if num_classes is None:
                raise ValueError("set_gt_label(multi_label=True) needs num_classes")
            ids = torch.as_tensor(value, dtype=torch.long).reshape(-1)
            hot = torch.zeros(num_classes, dtype=torch.float32)
            hot[ids] = 1.0
            self.gt_label = hot
        else:
            self.gt_label = torch.as_tensor(value, dtype=torch.long).reshape(1)
        return self

    @property
    def gt_label(self) -> torch.Tensor:
        return self._gt_label

    @gt_label.setter
    def gt_label(self, value: torch.Tensor) -> None:
        self.set_field(value, "_gt_label", dtype=torch.Tensor)

    @gt_label.deleter
    def gt_label(self) -> None:
        del self._gt_label

    @property
    def pred_score(self) -> torch.Tensor:
        return self._pred_score

    @pred_score.setter
    def pred_score(self, value: torch.Tensor) -> None:
        self.set_field(value, "_pred_score", dtype=torch.Tensor)

    @pred_score.deleter
    def pred_score(self) -> None:
        del self._pred_score

    @property
    def pred_label(self) -> torch.Tensor:
        return self._pred_label

    @pred_label.setter
    def pred_label(self, value: torch.Tensor) -> None:
        self.set_field(value, "_pred_label", dtype=torch.Tensor)

    @pred_label.deleter
    def pred_label(self) -> None:
        del self._pred_label
