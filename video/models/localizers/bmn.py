"""BMN, the Boundary-Matching Network for temporal action proposals (Lin et al., "BMN: Boundary-Matching Network
for Temporal Action Proposal Generation", ICCV 2019), on pre-extracted feature sequences."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from oars.models.task_model import TaskModel
from oars_deploy.predictors.video_segments.segments import (
    bmn_proposals,
    combine_classes,
    proposals_in_seconds,
    soft_nms,
)
from video.registry import MODELS
from video.structures import ActionDataSample

from .bm_layer import bm_valid_mask, boundary_matching, interp1d_sample_mask
from .data_preprocessor import LocalizationDataPreprocessor
from .targets import bmn_targets, pad_segments

PROPOSALS_KEY = "proposals"
SEGMENTS_KEY = "segments"
CLASS_SCORES_KEY = "class_scores"


def _conv1d(cin: int, cout: int, kernel: int, groups: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel_size=kernel, padding=kernel // 2, groups=groups)


def gt_segments_of(sample: ActionDataSample) -> Tensor:
    """A data sample's ground-truth segments: ``gt_bbox`` [N, 2] (normalised start, end), read from the sample
    itself or from its ``gt_instances`` (MMAction2's layout).

    Raises:
        KeyError: neither is there (naming the field, which ``PackLocalizationInputs`` should have packed).
    """
    if "gt_bbox" in sample:
        return sample.gt_bbox
    instances = sample.get("gt_instances")
    if instances is not None and "gt_bbox" in instances:
        return instances.gt_bbox
    raise KeyError("BMN.loss: a data sample has no 'gt_bbox' (normalised [N, 2] segments); pack it with "
                   "PackLocalizationInputs(keys=['gt_bbox'])")


@MODELS.register_module()
class BMN(TaskModel):
    """Boundary-Matching Network: start / end probabilities and the [D, T] boundary-matching confidence map of a
    feature sequence [B, C, T], and proposals from them.

    * Base module: two grouped conv1d (kernel 3, ``hidden_dim_1d``, groups 4) with ReLU.
    * Temporal evaluation module: per boundary (start, end) a grouped conv1d + ReLU and a conv1d to one channel,
      sigmoid -> [B, T].
    * Proposal evaluation module: conv1d + ReLU, the boundary-matching layer (one matrix product with a fixed
      sampling matrix, built once here and kept as a non-persistent buffer: it is a function of the four
      arguments below, 128 MB at full size, not a weight), conv3d (kernel ``(num_sample, 1, 1)``) + ReLU to
      ``hidden_dim_3d``, conv2d 1x1 and two 3x3 at ``hidden_dim_2d`` with ReLU, conv2d 1x1 to 2 channels,
      sigmoid -> [B, 2, D, T] (channel 0 the regressed IoU, channel 1 the classified IoU).

    Cell ``[d, s]`` of the map is the proposal from position ``s`` to ``s + d + 1`` (normalised ``s / T`` to
    ``(s + d + 1) / T``). Module names are MMAction2's (``x_1d_b``, ``x_1d_s``, ``x_1d_e``, ``x_1d_p``,
    ``x_3d_p``, ``x_2d_p``), so its checkpoints load once their ``sample_mask`` entry is dropped.

    Real size (MMAction2 ``bmn_2xb8-400x100-9e_activitynet-feature``): ``feat_dim=400, tscale=dscale=100``,
    hidden 256 / 128 / 512: 4,978,564 parameters.

    Args:
        feat_dim: feature channels C (400: the CUHK two-stream ActivityNet features).
        tscale: positions T of every input sequence (the pipeline rescales each video to it).
        dscale: longest proposal D, in positions (``<= tscale``).
        prop_boundary_ratio, num_sample, num_sample_perbin: the boundary-matching layer's sampling (0.5, 32, 3).
        hidden_dim_1d, hidden_dim_2d, hidden_dim_3d: widths (256, 128, 512).
        loss: config of the loss (:class:`BMNLoss`).
        soft_nms: ``alpha``, ``low_threshold``, ``high_threshold``, ``top_k`` of :func:`soft_nms`.
        max_proposals: proposals kept per video after Soft-NMS (100).
        classify: ``{top_k: k}`` to also give detections (``segments``): each proposal paired with the video's
            ``k`` best classes of its ``class_scores`` metainfo (the recognizer's mean class probabilities that
            ``tools/extract_features.py`` writes as ``<video_id>.scores.npy``, loaded by
            ``LoadVideoClassScores``), ActivityNet's detection post-processing; None (default): proposals only.
        data_preprocessor: default :class:`LocalizationDataPreprocessor`.
        init_cfg: as mmengine's ``BaseModel``.

    Modes: ``loss`` -> ``{'loss_tem', 'loss_pem_reg', 'loss_pem_cls'}`` (samples carry ``gt_bbox``);
    ``predict`` -> the data samples, each with ``proposals`` float32 [K, 3] (start s, end s, score), K <=
    ``max_proposals``, by decreasing score (metainfo ``feature_second`` or ``duration_second`` needed), and with
    ``classify`` ``segments`` float32 [K * k, 4] (start s, end s, proposal score x class probability, class id);
    ``tensor`` -> (confidence [B, 2, D, T], start [B, T], end [B, T]), what an export outputs.
    """

    def __init__(self, feat_dim: int = 400, tscale: int = 100, dscale: int | None = None,
                 prop_boundary_ratio: float = 0.5, num_sample: int = 32, num_sample_perbin: int = 3,
                 hidden_dim_1d: int = 256, hidden_dim_2d: int = 128, hidden_dim_3d: int = 512,
                 loss: dict | None = None, soft_nms: Mapping[str, float] | None = None, max_proposals: int = 100,
                 classify: Mapping[str, int] | None = None, data_preprocessor: dict | nn.Module | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = LocalizationDataPreprocessor()
        elif isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        dscale = tscale if dscale is None else dscale
        if hidden_dim_1d % 4 or feat_dim % 4:
            raise ValueError(f"BMN: feat_dim={feat_dim} and hidden_dim_1d={hidden_dim_1d} must be multiples of 4 "
                             "(the base and temporal modules are conv1d with groups=4)")
        self.feat_dim, self.tscale, self.dscale = feat_dim, tscale, dscale
        self.num_sample = num_sample
        self.soft_nms_cfg = {**dict(alpha=0.4, low_threshold=0.5, high_threshold=0.9, top_k=100), **(soft_nms or {})}
        self.max_proposals = max_proposals
        self.classify_top_k = self._classify_top_k(classify)
        self.loss_module = MODELS.build(loss or dict(type="BMNLoss"))

        h1, h2, h3 = hidden_dim_1d, hidden_dim_2d, hidden_dim_3d
        self.x_1d_b = nn.Sequential(_conv1d(feat_dim, h1, 3, 4), nn.ReLU(inplace=True),
                                    _conv1d(h1, h1, 3, 4), nn.ReLU(inplace=True))
        self.x_1d_s = nn.Sequential(_conv1d(h1, h1, 3, 4), nn.ReLU(inplace=True), _conv1d(h1, 1, 1), nn.Sigmoid())
        self.x_1d_e = nn.Sequential(_conv1d(h1, h1, 3, 4), nn.ReLU(inplace=True), _conv1d(h1, 1, 1), nn.Sigmoid())
        self.x_1d_p = nn.Sequential(_conv1d(h1, h1, 3), nn.ReLU(inplace=True))
        self.x_3d_p = nn.Sequential(nn.Conv3d(h1, h3, kernel_size=(num_sample, 1, 1)), nn.ReLU(inplace=True))
        self.x_2d_p = nn.Sequential(
            nn.Conv2d(h3, h2, kernel_size=1), nn.ReLU(inplace=True),
            nn.Conv2d(h2, h2, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(h2, h2, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(h2, 2, kernel_size=1), nn.Sigmoid())
        self.register_buffer("sample_mask", interp1d_sample_mask(tscale, dscale, prop_boundary_ratio, num_sample,
                                                                 num_sample_perbin), persistent=False)
        self.register_buffer("bm_mask", bm_valid_mask(tscale, dscale), persistent=False)

    def _check_inputs(self, inputs: Tensor) -> None:
        if inputs.dim() != 3 or inputs.shape[1:] != (self.feat_dim, self.tscale):
            raise ValueError(f"BMN: inputs must be [B, feat_dim={self.feat_dim}, tscale={self.tscale}], got "
                             f"{tuple(inputs.shape)} (rescale each video to tscale positions in the pipeline)")

    def _forward(self, inputs: Tensor, data_samples: Any = None) -> tuple[Tensor, Tensor, Tensor]:
        """float32 [B, C, T] -> (confidence [B, 2, D, T], start [B, T], end [B, T]), all sigmoid outputs."""
        self._check_inputs(inputs)
        base = self.x_1d_b(inputs)
        start = self.x_1d_s(base).squeeze(1)
        end = self.x_1d_e(base).squeeze(1)
        bm = boundary_matching(self.x_1d_p(base), self.sample_mask, self.num_sample, self.dscale)
        confidence = self.x_2d_p(self.x_3d_p(bm).squeeze(2))
        return confidence, start, end

    def loss(self, inputs: Tensor, data_samples: Sequence[ActionDataSample]) -> dict[str, Tensor]:
        confidence, start, end = self._forward(inputs)
        segments, valid = pad_segments([gt_segments_of(s) for s in data_samples], inputs.device)
        gt_iou, gt_start, gt_end = bmn_targets(segments, valid, self.tscale, self.dscale)
        return self.loss_module(confidence, start, end, gt_iou, gt_start, gt_end, self.bm_mask)

    @staticmethod
    def video_seconds(metainfo: Mapping[str, Any]) -> float:
        """The seconds the feature sequence spans, which a proposal's normalised [0, 1] times are multiplied by:
        ``feature_second`` (``ActivityNetFeatureDataset`` sets it to ``feature_frame / duration_frame *
        duration_second``, MMAction2's correction for the frames after the last whole snippet; the same span
        ``GenerateLocalizationLabels`` normalised ``gt_bbox`` by), else ``duration_second``.

        Raises:
            KeyError: neither is in the metainfo.
        """
        seconds = metainfo.get("feature_second") or metainfo.get("duration_second")
        if not seconds:
            raise KeyError("BMN.predict: a data sample has neither 'feature_second' nor 'duration_second' metainfo "
                           "(needed to give proposals in seconds); keep them in PackLocalizationInputs' meta_keys")
        return float(seconds)

    @staticmethod
    def _classify_top_k(classify: Mapping[str, int] | None) -> int | None:
        """``classify.top_k`` checked (None: proposals only)."""
        if classify is None:
            return None
        if not isinstance(classify, Mapping) or set(classify) != {"top_k"}:
            raise ValueError(f"BMN: classify must be {{top_k: k}} or null, got {classify!r}")
        top_k = classify["top_k"]
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"BMN: classify.top_k must be a positive int (classes per proposal), got {top_k!r}")
        return top_k

    def postprocess(self, confidence: np.ndarray, start: np.ndarray, end: np.ndarray, seconds: float,
                    class_scores: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """One video's graph outputs -> (proposals float [K, 3] in seconds, detections float [K * k, 4] or None),
        with the runtime's NumPy functions (:mod:`oars_deploy.predictors.video_segments.segments`), so evaluation and
        the deployed
        ``video_segments`` predictor run the same code.

        Args:
            confidence: float [2, D, T]; start, end: float [T] (``mode='tensor'`` outputs of one video).
            seconds: the span the features cover (:meth:`video_seconds`).
            class_scores: float [C] video-level class probabilities; needed when ``classify`` is set.
        """
        candidates = bmn_proposals(start, end, confidence)
        kept = soft_nms(candidates, **self.soft_nms_cfg)[: self.max_proposals]
        proposals = proposals_in_seconds(kept, seconds)
        if self.classify_top_k is None:
            return proposals, None
        return proposals, combine_classes(proposals, class_scores, self.classify_top_k)

    @torch.no_grad()
    def predict(self, inputs: Tensor, data_samples: Sequence[ActionDataSample] | None = None
                ) -> list[ActionDataSample]:
        if data_samples is None or len(data_samples) != inputs.shape[0]:
            raise ValueError("BMN.predict needs one data sample per video, with 'feature_second' or "
                             "'duration_second' metainfo (proposals are given in seconds)")
        confidence, start, end = (t.float().cpu().numpy() for t in self._forward(inputs))
        for i, sample in enumerate(data_samples):
            seconds = self.video_seconds(sample.metainfo)
            scores = None
            if self.classify_top_k is not None:
                scores = sample.metainfo.get(CLASS_SCORES_KEY)
                if scores is None:
                    raise KeyError(f"BMN.predict: model.classify is set but video {sample.metainfo.get('video_name')!r}"
                                   " has no 'class_scores' metainfo; add LoadVideoClassScores to the test pipeline "
                                   "(it reads <video_id>.scores.npy, written by tools/extract_features.py)")
            proposals, segments = self.postprocess(confidence[i], start[i], end[i], seconds, scores)
            sample.set_field(torch.from_numpy(proposals).float(), PROPOSALS_KEY)
            if segments is not None:
                sample.set_field(torch.from_numpy(segments).float(), SEGMENTS_KEY)
        return list(data_samples)
