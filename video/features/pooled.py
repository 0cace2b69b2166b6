"""The recognizer's features before its classification layer, per snippet.

What is taken: the input of ``cls_head.fc_cls``, the one linear classifier every recognizer head ends with
(:class:`video.models.heads.base.BaseHead`). That is the backbone's output after the head's own pooling and
consensus -- TSN/TSM: spatial average, then the average over the view's T segments; I3D/R(2+1)D: the global
3D average; StNet: after its temporal Xception block -- and before dropout (inactive in eval mode) and ``fc_cls``.
A forward pre-hook reads it, so the features come from exactly the code that classifies, for any head. The views
of one snippet (crops, twice-sampled or multi-clip test views) are averaged, as the head averages their scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from oars.errors import OarsError


def check_recognizer(model: nn.Module, where: str) -> nn.Linear:
    """The model's ``cls_head.fc_cls``, or ``OarsError`` when the model is not a clip recognizer with one.

    Args:
        model: the built model. where: the config file, for the message.
    """
    head = getattr(model, "cls_head", None)
    fc = getattr(head, "fc_cls", None)
    if not hasattr(model, "view_scores") or not isinstance(fc, nn.Linear):
        raise OarsError(f"{where}: {type(model).__name__} is not a video recognizer with a classification layer "
                        "(cls_head.fc_cls); features are extracted with TSN, TSM, R(2+1)D or another clip "
                        "recognizer")
    return fc


@torch.no_grad()
def snippet_outputs(model: nn.Module, inputs: Sequence[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled features and class probabilities of a batch of snippets, from one forward.

    Args:
        model: a recognizer in eval mode (``view_scores``, ``data_preprocessor``, ``cls_head.fc_cls``).
        inputs: B uint8 snippet inputs as ``PackActionInputs`` gives them (one shape).

    Returns:
        (float32 [B, C] (C = ``fc_cls.in_features``): per snippet, the classifier's input averaged over the
        snippet's views; float32 [B, K]: per snippet, the class probabilities the recognizer predicts for it, its
        ``pred_score`` (the head's view averaging and softmax / sigmoid)), on the CPU. A video's mean of the
        second over its snippets is its class scores (``<video_id>.scores.npy``), which ActivityNet-style
        detection pairs with the localiser's proposals.
    """
    fc = check_recognizer(model, type(model).__name__)
    head = model.cls_head
    captured: list[torch.Tensor] = []
    handle = fc.register_forward_pre_hook(lambda _module, args: captured.append(args[0].detach()))
    try:
        batch = model.data_preprocessor({"inputs": list(inputs), "data_samples": None}, False)["inputs"]
        logits, num_views = model.view_scores(batch)
    finally:
        handle.remove()
    feats = torch.cat(captured).float()  # [B*V, C], views of a snippet adjacent (max_testing_views: in chunks)
    averaged = head.average_views(logits, num_views)
    if head.average_clips is None:  # one view (the head refuses several without averaging in predict)
        averaged = averaged[:, 0]
    probs = averaged if head.average_clips == "prob" else head.activate(averaged)
    feats = feats.reshape(len(inputs), num_views, -1).mean(dim=1)
    return (feats.cpu().numpy().astype(np.float32, copy=False),
            probs.float().cpu().numpy().astype(np.float32, copy=False))


def snippet_features(model: nn.Module, inputs: Sequence[torch.Tensor]) -> np.ndarray:
    """The pooled features of :func:`snippet_outputs` alone: float32 [B, C]."""
    return snippet_outputs(model, inputs)[0]
