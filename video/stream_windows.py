"""``tools/infer.py -c VIDEO_CFG -w CKPT -i VIDEO|URL|CAMERA --window N [--stride S]``: sliding-window clip
classification of a stream with the PyTorch recognizer.

Why this shape: ``oars-infer --window`` already classifies streams window by window from an export
(:mod:`oars_deploy.streams.windows`: ring buffer, sampling, pre-processing, records, labelled video). The
checkpoint takes the export's place there: :class:`TorchClipPredictor` has the runtime ``VideoPredictor``'s
interface, with the sampling and pre-processing steps the export would write (:func:`video.export.describe_pipeline`)
and the export's graph module (:class:`video.export.RecognizerExport`) run eagerly, so a window gets the same numbers
from a checkpoint and from its export.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from oars_deploy.predictors.clip_classes.predictor import ScorePredictor


class TorchClipPredictor(ScorePredictor):
    """A recognizer in the runtime ``VideoPredictor``'s role for :func:`oars_deploy.streams.windows.run_windows`.

    Args:
        model: a ``Recognizer2D`` / ``Recognizer3D`` (eval mode) with its weights.
        cfg: its config (the test pipeline gives the sampling and the pre-processing).

    Attributes:
        sampling, steps: deploy.yaml's ``sampling`` section and video pre-processing steps of this config.
        input_shape: ``[1, ...]`` the pre-processed input of one video. labels: class names.
        model_dir: the config file (named in messages where the runtime names the export folder).
    """

    what = "windows"

    def __init__(self, model: Any, cfg: Any) -> None:
        from video.export import RecognizerExport, describe_pipeline, input_shape, layout

        desc = describe_pipeline(cfg)
        self.model_dir = cfg.filename
        self.sampling: dict = dict(desc["sampling"])
        self.steps: list[dict] = list(desc["steps"])
        self.input_shape: list[int] = list(input_shape(desc, 1))
        self.batch_size: int | None = None
        meta = getattr(model, "dataset_meta", None) or {}
        self.labels: list[str] = list(meta.get("classes") or [str(i) for i in range(int(model.num_classes))])
        self.module = RecognizerExport(model, add_view_axis=layout(desc) == "NCTHW").eval()
        self.device = next(model.parameters()).device

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Class scores float32 ``[N, C]`` of pre-processed windows ``[N, ...]`` (``input_shape[1:]`` each): the
        export's graph module run eagerly (views averaged, activation applied: the model's ``pred_score``)."""
        with torch.no_grad():
            scores = self.module(torch.from_numpy(np.ascontiguousarray(batch)).to(self.device))
        return scores.float().cpu().numpy()
