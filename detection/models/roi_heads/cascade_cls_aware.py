"""Class-aware Cascade R-CNN: PaddleDetection's ``CascadeRCNNClsAware`` (the box head of CACascade R-CNN, the
Objects365 2019 full-track winner) on :class:`CascadeRoIHead`.

What changes from the plain cascade (MMDetection's class-agnostic stages):

- every stage regresses one box per class (``reg_class_agnostic: false``: ``4 * C`` deltas);
- the box each RoI carries to the next stage is the one of its top-scoring foreground class, in training too
  (Paddle's ``box_decoder_and_assign``; MMDetection uses the target class of positives);
- inference merges the stages: the class probabilities are ``sum_i w_i * softmax(stage_i)`` and each class's
  box is ``sum_i w_i * box_i`` with ``box_i`` stage ``i``'s regression of the boxes stage ``i`` was given,
  ``w = stage_score_weights`` (Paddle: ``[0.2, 0.3, 0.5]``).

The defaults (IoU 0.5 / 0.6 / 0.7, coder stds of Paddle's regression weights [10, 10, 5, 5], [20, 20, 10, 10],
[30, 30, 15, 15], stage loss weights [1, 0.5, 0.25]) are in ``configs/detection/cacascade_rcnn/``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from detection.registry import MODELS

from .cascade_roi_head import CascadeRoIHead


@MODELS.register_module()
class CascadeClsAwareRoIHead(CascadeRoIHead):
    """Cascade R-CNN with class-aware regression in every stage and weighted stage merging.

    Args:
        stage_score_weights: one weight per stage for the merged probabilities and boxes (>= 0, summing to 1:
            a weighted mean; Paddle ``[0.2, 0.3, 0.5]``).
        score_combination: must be ``'probs'`` (the stages' softmax probabilities are merged).
        **kwargs: as :class:`CascadeRoIHead`; every ``bbox_head`` needs ``reg_class_agnostic: false``.

    Raises:
        ValueError: a weight list of the wrong length, negative or not summing to 1, another score
            combination, or a class-agnostic stage.
    """

    def __init__(self, *args: Any, stage_score_weights: Sequence[float], score_combination: str = "probs",
                 **kwargs: Any) -> None:
        if score_combination != "probs":
            raise ValueError(f"CascadeClsAwareRoIHead: score_combination={score_combination!r}; the class-aware "
                             "cascade merges the stages' probabilities: use 'probs'")
        super().__init__(*args, score_combination=score_combination, **kwargs)
        weights = [float(w) for w in stage_score_weights]
        if len(weights) != self.num_stages or min(weights) < 0 or not math.isclose(sum(weights), 1.0, abs_tol=1e-6):
            raise ValueError(f"CascadeClsAwareRoIHead: stage_score_weights={list(stage_score_weights)} must be "
                             f"{self.num_stages} weights >= 0 summing to 1 (Paddle: [0.2, 0.3, 0.5])")
        agnostic = [i for i, head in enumerate(self.bbox_head) if head.reg_class_agnostic]
        if agnostic:
            raise ValueError(f"CascadeClsAwareRoIHead: bbox_head{agnostic} regress class-agnostic boxes; the "
                             "class-aware cascade needs reg_class_agnostic: false in every stage")
        self.stage_score_weights = weights

    def _combine(self, stage_scores: list[Tensor]) -> Tensor:
        """``sum_i w_i * softmax(stage_scores[i])``: ``[R, C + 1]`` probabilities."""
        probs = torch.stack([F.softmax(s.float(), dim=-1) for s in stage_scores])
        return torch.einsum("s,s...->...", probs.new_tensor(self.stage_score_weights), probs)

    def combine_boxes(self, stage_boxes: list[Tensor]) -> Tensor:
        """``sum_i w_i * stage_boxes[i]``: every stage's class boxes ``[B, K, C, 4]`` merged."""
        boxes = torch.stack([b.float() for b in stage_boxes])
        return torch.einsum("s,s...->...", boxes.new_tensor(self.stage_score_weights), boxes)

    def refine_labels(self, target_labels: Tensor) -> Tensor:
        """Every sampled RoI moves by its top-scoring foreground class (Paddle's ``box_decoder_and_assign``)."""
        return torch.full_like(target_labels, self.num_classes)
