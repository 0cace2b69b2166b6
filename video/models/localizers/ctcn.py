"""C-TCN, the concept-wise temporal convolutional network for temporal action localisation (Baidu's ActivityNet
2018 winning entry, released in PaddleVideo as ``CTCN``), on pre-extracted per-snippet feature sequences."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from oars.models.task_model import TaskModel
from video.registry import MODELS, TASK_UTILS
from video.structures import ActionDataSample

from .ctcn_anchors import anchor_targets, decode
from .ctcn_backbone import ConceptTCN  # noqa: F401  (registers the backbone the default config names)
from .ctcn_post import ctcn_detections
from .data_preprocessor import LocalizationDataPreprocessor
from .targets import pad_segments

SEGMENTS_KEY = "segments"  # float32 [K, 4] (start_s, end_s, score, class id): what LocalizationMetric's mAP reads


def _targets_of(sample: ActionDataSample) -> tuple[Tensor, Tensor]:
    """(``gt_bbox`` float [N, 2] in [0, 1], ``gt_labels`` int64 [N]) of a data sample (or of its
    ``gt_instances``); labels default to 0 (one class) when absent."""
    source = sample if "gt_bbox" in sample else sample.get("gt_instances")
    if source is None or "gt_bbox" not in source:
        raise KeyError("CTCN.loss: a data sample has no 'gt_bbox' (normalised [N, 2] segments); pack it with "
                       "GenerateLocalizationLabels and PackLocalizationInputs")
    bbox = torch.as_tensor(source.gt_bbox, dtype=torch.float32).reshape(-1, 2)
    labels = source.get("gt_labels")
    labels = torch.zeros(len(bbox), dtype=torch.long) if labels is None else torch.as_tensor(labels).long().view(-1)
    if labels.shape[0] != bbox.shape[0]:
        raise ValueError(f"CTCN.loss: a data sample has {bbox.shape[0]} gt_bbox rows but {labels.shape[0]} labels")
    return bbox, labels


def video_seconds(metainfo: Mapping[str, Any]) -> float:
    """The seconds a normalised [0, 1] time is multiplied by: ``feature_second`` (the span the features cover,
    which ``GenerateLocalizationLabels`` normalised ``gt_bbox`` by), else ``duration_second``."""
    seconds = metainfo.get("feature_second") or metainfo.get("duration_second")
    if not seconds:
        raise KeyError("CTCN.predict: a data sample has neither 'feature_second' nor 'duration_second' metainfo "
                       "(needed to give detections in seconds); keep them in PackLocalizationInputs' meta_keys")
    return float(seconds)


@MODELS.register_module()
class CTCN(TaskModel):
    """C-TCN: a feature sequence [B, C, T] (C = the concepts of every stream side by side, e.g. RGB then flow) is
    read as a one-channel [T, C] image; :class:`ConceptTCN` (temporal-only kernels, ResNet-50 bottlenecks and a
    temporal FPN) gives 8 levels of strides 4 .. 512; two heads shared by all levels (dropout, a (3, 1) conv,
    then a (1, C) conv that combines the concepts) score ``num_classes + 1`` classes (background first) and
    regress (centre, width) offsets ``10 * sigmoid - 5`` for every anchor of :class:`CTCNAnchorGenerator`
    (SSD-like default segments over time, built once at construction).

    Real size (PaddleVideo ``configs/ctcn.yaml``): T = 512, 402 concepts (201 RGB + 201 flow class scores of
    SENet-152 TSN snippets), 7 anchors per position (1785 in all), 200 classes + background: 318,021,421
    parameters, 290 M of them in the classification head's (1, 402) conv.

    One difference a checkpoint converter must mind: ``nn.Dropout`` scales by ``1 / (1 - p)`` while training,
    Paddle's fluid dropout (``downgrade_in_infer``) scales by ``1 - p`` at inference instead; the same network
    in eval mode therefore needs the heads' (3, 1) conv weights of a PaddleVideo checkpoint multiplied by 0.5.

    Args:
        num_classes: foreground classes K (ActivityNet v1.3: 200).
        streams: the feature streams, ``{name: width}`` in the order their columns are concatenated
            (PaddleVideo: ``{rgb: 201, flow: 201}``; RGB only: ``{rgb: 201}``); only the heads' (1, C) kernels
            depend on it, since the trunk is shared by every concept.
        temporal_dim: T (the pipeline resizes every video to it; every pyramid stride must divide it).
        backbone: config of :class:`ConceptTCN`.
        anchor_generator: config of :class:`CTCNAnchorGenerator` (``strides`` default to the backbone's).
        loc_channels, cls_channels: the heads' (3, 1) conv widths (256, 512).
        dropout: before each head (0.5).
        pos_iou: anchor-matching threshold (0.5).
        loss: config of :class:`CTCNLoss`.
        test_cfg: keyword arguments of :func:`ctcn_detections` (score/NMS/Soft-NMS thresholds and caps).
        max_proposals: detections (class dropped) also given as ``proposals`` for AR@AN (100).
        data_preprocessor: default :class:`LocalizationDataPreprocessor`.
        init_cfg: as mmengine's ``BaseModel``.

    Modes: ``loss`` -> ``{'loss_loc', 'loss_cls'}`` (samples carry ``gt_bbox`` and ``gt_labels``);
    ``predict`` -> the samples with ``segments`` float32 [K, 4] (start_s, end_s, score, class id) by decreasing
    score and ``proposals`` float32 [K', 3] (metainfo ``feature_second`` or ``duration_second`` needed);
    ``tensor`` -> (offsets [B, A, 2], class probabilities [B, A, K + 1]), what an export outputs.
    """

    def __init__(self, num_classes: int = 200, streams: Mapping[str, int] | None = None, temporal_dim: int = 512,
                 backbone: dict | None = None, anchor_generator: dict | None = None, loc_channels: int = 256,
                 cls_channels: int = 512, dropout: float = 0.5, pos_iou: float = 0.5, loss: dict | None = None,
                 test_cfg: Mapping[str, float] | None = None, max_proposals: int = 100,
                 data_preprocessor: dict | nn.Module | None = None, init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = LocalizationDataPreprocessor()
        elif isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        streams = dict(streams or {"rgb": 201, "flow": 201})
        if num_classes < 1 or not streams or any(int(w) < 1 for w in streams.values()):
            raise ValueError(f"CTCN: num_classes ({num_classes}) and every stream width ({streams}) must be >= 1")
        self.num_classes, self.temporal_dim = num_classes, temporal_dim
        self.streams = {str(k): int(v) for k, v in streams.items()}
        self.concepts = sum(self.streams.values())
        self.pos_iou, self.max_proposals = pos_iou, max_proposals
        self.test_cfg = dict(test_cfg or {})
        self.backbone = MODELS.build(backbone or dict(type="ConceptTCN"))
        gen_cfg = dict(anchor_generator or {})
        gen_cfg.setdefault("type", "CTCNAnchorGenerator")
        gen_cfg.setdefault("strides", self.backbone.strides)
        self.anchor_generator = TASK_UTILS.build(gen_cfg)
        if self.anchor_generator.strides != self.backbone.strides:
            raise ValueError(f"CTCN: anchor_generator.strides {self.anchor_generator.strides} must be the "
                             f"backbone's level strides {self.backbone.strides}")
        self.num_anchors = self.anchor_generator.num_anchors
        self.register_buffer("anchors", self.anchor_generator(temporal_dim), persistent=False)
        fpn, a, c = self.backbone.out_channels, self.num_anchors, self.concepts
        self.loc_head = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(fpn, loc_channels, (3, 1), padding=(1, 0)),
                                      nn.Conv2d(loc_channels, a * 2, (1, c)))
        self.cls_head = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(fpn, cls_channels, (3, 1), padding=(1, 0)),
                                      nn.Conv2d(cls_channels, a * (num_classes + 1), (1, c)))
        self.loss_module = MODELS.build(loss or dict(type="CTCNLoss"))

    def _check_inputs(self, inputs: Tensor) -> None:
        if inputs.dim() != 3 or inputs.shape[1:] != (self.concepts, self.temporal_dim):
            raise ValueError(f"CTCN: inputs must be [B, {self.concepts}, {self.temporal_dim}] (the streams "
                             f"{self.streams} concatenated per snippet, resized to temporal_dim steps), got "
                             f"{tuple(inputs.shape)}")

    def _raw(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        """float32 [B, C, T] -> (offsets [B, A, 2] in [-5, 5], class logits [B, A, K + 1])."""
        self._check_inputs(inputs)
        b = inputs.shape[0]
        levels = self.backbone(inputs.transpose(1, 2).unsqueeze(1))
        locs, logits = [], []
        for x in levels:
            # [B, A*2, T_l, 1] -> [B, T_l, A*2] -> [B, T_l*A, 2]: position-major, then anchor (the generator's order)
            locs.append(self.loc_head(x).squeeze(-1).transpose(1, 2).reshape(b, -1, 2))
            logits.append(self.cls_head(x).squeeze(-1).transpose(1, 2).reshape(b, -1, self.num_classes + 1))
        return 10.0 * torch.sigmoid(torch.cat(locs, dim=1)) - 5.0, torch.cat(logits, dim=1)

    def _forward(self, inputs: Tensor, data_samples: Any = None) -> tuple[Tensor, Tensor]:
        loc, logits = self._raw(inputs)
        return loc, logits.softmax(dim=-1)

    def loss(self, inputs: Tensor, data_samples: Sequence[ActionDataSample]) -> dict[str, Tensor]:
        """float32 [B, C, T] and samples with ``gt_bbox`` [N, 2] / ``gt_labels`` [N] -> ``{'loss_loc',
        'loss_cls'}``: anchors matched to the segments (:func:`anchor_targets`), then :class:`CTCNLoss`."""
        loc, logits = self._raw(inputs)
        pairs = [_targets_of(s) for s in data_samples]
        segments, valid = pad_segments([p[0] for p in pairs], inputs.device)
        labels = torch.zeros(valid.shape, dtype=torch.long, device=inputs.device)
        for i, (_, lab) in enumerate(pairs):
            if lab.numel() and (int(lab.min()) < 0 or int(lab.max()) >= self.num_classes):
                raise ValueError(f"CTCN.loss: gt_labels {lab.tolist()} must lie in [0, num_classes="
                                 f"{self.num_classes})")
            labels[i, : lab.numel()] = lab.to(inputs.device)
        loc_t, cls_t = anchor_targets(self.anchors, segments, labels, valid, self.pos_iou)
        return self.loss_module(loc, logits, loc_t, cls_t)

    @torch.no_grad()
    def predict(self, inputs: Tensor, data_samples: Sequence[ActionDataSample] | None = None
                ) -> list[ActionDataSample]:
        """float32 [B, C, T] -> the samples with ``segments`` [K, 4] and ``proposals`` [K', 3] in seconds
        (decode, per-class NMS and Soft-NMS: :func:`ctcn_detections`; segments clipped to the features' span,
        those left empty dropped)."""
        if data_samples is None or len(data_samples) != inputs.shape[0]:
            raise ValueError("CTCN.predict needs one data sample per video, with 'feature_second' or "
                             "'duration_second' metainfo (detections are given in seconds)")
        loc, probs = self._forward(inputs)
        segments = decode(loc.float(), self.anchors)
        for i, sample in enumerate(data_samples):
            seconds = video_seconds(sample.metainfo)
            dets = ctcn_detections(segments[i], probs[i].float(), **self.test_cfg)
            times = dets[:, :2].clamp(0.0, 1.0) * seconds
            out = torch.cat([times, dets[:, 2:]], dim=1)[times[:, 1] > times[:, 0]].float().cpu()
            sample.set_field(out, SEGMENTS_KEY)
            sample.set_field(out[: self.max_proposals, :3].clone(), "proposals")
        return list(data_samples)
