"""Pieces shared by the anchor-based and anchor-free dense heads (RetinaNet, FCOS): per-level flattening, the
static per-level candidate selection of the export seam, eager NMS over those candidates, and gt gathering.

Eager predict and export share one implementation: ``export_decode`` (fixed shapes, candidates marked by
non-zero scores) followed by :func:`nms_predict` (torchvision's ``batched_nms`` per image) gives the same
detections as :class:`detection.export.DenseWithNMS` (ONNX ``NonMaxSuppression``) on an input of that size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor
from torchvision.ops import batched_nms, clip_boxes_to_image

from oars.errors import DataError

TEST_CFG_KEYS = ("score_thr", "nms", "max_per_img", "nms_pre")
SOFT_NMS_KEYS = ("type", "method", "sigma", "iou_threshold", "min_score")
NMS_EXAMPLES = ("{iou_threshold: 0.5} (type: nms), or {type: soft_nms, method: gaussian, sigma: 0.5, "
                "iou_threshold: 0.3, min_score: 0.001} (method: gaussian | linear)")


def shared_tower_channels(name: str, in_channels: int | Sequence[int]) -> int:
    """The one channel count of every input level: the towers are shared by the levels.

    Raises:
        ValueError: the levels differ in channels (naming the head and the channels given).
    """
    chans = [in_channels] if isinstance(in_channels, int) else [int(c) for c in in_channels]
    if not chans or len(set(chans)) != 1:
        raise ValueError(f"{name}: the towers are shared by the levels, so every input level needs the same "
                         f"channels; got in_channels={in_channels!r}")
    return chans[0]


def build_priors(name: str, anchor_generator: dict[str, Any], strides: Sequence[int] | None, prior_prob: float
                 ) -> tuple[Any, list[int]]:
    """The head's prior generator (``TASK_UTILS``) and its strides, checked against the neck's and with a valid
    ``prior_prob`` (the initial foreground probability of every class logit): what RetinaNet and FCOS share.

    Raises:
        ValueError: ``prior_prob`` outside (0, 1), or the neck's strides differ from the generator's.
    """
    from detection.registry import TASK_UTILS

    if not 0 < prior_prob < 1:
        raise ValueError(f"{name}: prior_prob must be in (0, 1), got {prior_prob!r}")
    generator = TASK_UTILS.build(dict(anchor_generator))
    own = list(generator.strides)
    if strides is not None and [int(s) for s in strides] != own:
        raise ValueError(f"{name}: the neck's levels have strides {list(strides)} but anchor_generator.strides "
                         f"is {own}; they must match")
    return generator, own


def single_assigner_cfg(name: str, train_cfg: dict[str, Any] | None, assigner: str) -> dict[str, Any]:
    """``train_cfg`` checked to be exactly ``{assigner: {...}}`` (``assigner`` names the expected type for the
    message)."""
    cfg = dict(train_cfg or {})
    if set(cfg) - {"assigner"} or "assigner" not in cfg:
        raise ValueError(f"{name}: train_cfg needs exactly {{assigner: {{type: {assigner}, ...}}}}, got keys "
                         f"{sorted(cfg)}")
    return cfg


def check_nms_cfg(name: str, nms: Any) -> dict[str, Any]:
    """A ``test_cfg.nms`` of a detection head (dense or RoI) validated: what the one-stage and the two-stage
    detectors share.

    ``{iou_threshold}`` (``type: nms``, the default): greedy per-class NMS. ``{type: soft_nms, method, sigma,
    iou_threshold, min_score}``: per-class soft-NMS (:mod:`oars_deploy.soft_nms`): every candidate of the kept
    box's class overlapping it by more than ``iou_threshold`` (0: any overlap, Bodla's Gaussian rule) is decayed,
    ``gaussian``: ``score * exp(-iou ** 2 / sigma)``, ``linear``: ``score * (1 - iou)``; candidates whose
    decayed score falls below ``min_score`` are dropped. Soft-NMS runs in eager inference (and in the runtime on
    raw exported outputs); an exported graph that holds its NMS refuses it.

    Returns:
        a copy (soft-NMS: with floats for the numbers).

    Raises:
        ValueError: an unknown type or key, a missing key, or a value out of range, naming ``name``.
    """
    if not isinstance(nms, dict):
        raise ValueError(f"{name}: test_cfg.nms={nms!r} is invalid; expected {NMS_EXAMPLES}")
    kind = nms.get("type", "nms")
    if kind == "nms":
        if set(nms) - {"iou_threshold", "type"} or "iou_threshold" not in nms:
            raise ValueError(f"{name}: test_cfg.nms={nms} is invalid; expected {NMS_EXAMPLES}")
        if not 0 < float(nms["iou_threshold"]) <= 1:
            raise ValueError(f"{name}: test_cfg.nms.iou_threshold must be in (0, 1], got {nms['iou_threshold']!r}")
        return dict(nms)
    if kind != "soft_nms":
        raise ValueError(f"{name}: test_cfg.nms.type={kind!r} is not supported; accepted: ['nms', 'soft_nms']")
    unknown = sorted(set(nms) - set(SOFT_NMS_KEYS))
    missing = [k for k in SOFT_NMS_KEYS if k not in nms]
    if unknown or missing:
        raise ValueError(f"{name}: test_cfg.nms (soft_nms) has unknown keys {unknown} and lacks {missing}; expected "
                         f"{NMS_EXAMPLES}")
    if nms["method"] not in ("gaussian", "linear"):
        raise ValueError(f"{name}: test_cfg.nms.method={nms['method']!r} is not supported; accepted: "
                         "['gaussian', 'linear']")
    out = dict(type="soft_nms", method=str(nms["method"]), sigma=float(nms["sigma"]),
               iou_threshold=float(nms["iou_threshold"]), min_score=float(nms["min_score"]))
    if not out["sigma"] > 0:
        raise ValueError(f"{name}: test_cfg.nms.sigma must be > 0, got {nms['sigma']!r}")
    if not 0 <= out["iou_threshold"] < 1:
        raise ValueError(f"{name}: test_cfg.nms.iou_threshold must be in [0, 1) for soft_nms, got "
                         f"{nms['iou_threshold']!r}")
    if not 0 <= out["min_score"] < 1:
        raise ValueError(f"{name}: test_cfg.nms.min_score must be in [0, 1), got {nms['min_score']!r}")
    return out


def refuse_soft_nms_in_graph(nms: dict[str, Any], key: str) -> None:
    """Raise ValueError when ``nms`` (a checked ``test_cfg.nms``, found at config key ``key``) asks for soft-NMS
    and the exported graph holds the NMS: ONNX ``NonMaxSuppression`` has no soft form, and a graph that silently
    ran hard NMS would not be the model that was evaluated."""
    if nms.get("type") == "soft_nms":
        raise ValueError(f"{key}.type=soft_nms cannot be exported with the NMS inside the graph (ONNX "
                         f"NonMaxSuppression has no soft form); set {key} to {{type: nms, iou_threshold: 0.5}} for "
                         "the export, or (one-stage detectors) export.postprocess: false, where the predictor "
                         "runs the soft-NMS")


def soft_nms_image(boxes: Tensor, scores: Tensor, nms: dict[str, Any], score_thr: float, max_per_img: int,
                   nms_pre: int) -> tuple[Tensor, Tensor, Tensor]:
    """One image's per-class soft-NMS on tensors: :func:`oars_deploy.soft_nms.multiclass_soft_nms` (the runtime's
    NumPy implementation, so that the model and the deployed predictor cannot disagree) on CPU copies.

    Args:
        boxes: float ``[N, 4]`` (shared by the classes) or ``[N, C, 4]`` (one per class), xyxy.
        scores: float ``[N, C]``; pairs with a score > ``score_thr`` are candidates.
        nms: a ``soft_nms`` config of :func:`check_nms_cfg`.
        score_thr, max_per_img, nms_pre: as the heads' ``test_cfg`` (<= 0: no limit).

    Returns:
        ``(boxes [K, 4] float32, decayed scores [K] float32, labels [K] int64)`` on ``scores``' device, by
        decreasing score.
    """
    from oars_deploy.soft_nms import multiclass_soft_nms

    b, s, lab = multiclass_soft_nms(
        boxes.detach().float().cpu().numpy(), scores.detach().float().cpu().numpy(), score_thr, nms["method"],
        nms["sigma"], nms["iou_threshold"], nms["min_score"], max_per_img, nms_pre)
    device = scores.device
    return torch.from_numpy(b).to(device), torch.from_numpy(s).to(device), torch.from_numpy(lab).to(device)


def check_test_cfg(name: str, test_cfg: dict[str, Any] | None) -> dict[str, Any]:
    """A dense head's ``test_cfg`` with every key present and valid.

    Keys: ``score_thr`` (a (prior, class) pair is a candidate when its score is > this), ``nms_pre`` (per level,
    the best candidates kept; <= 0: all), ``nms`` (per-class NMS or soft-NMS: :func:`check_nms_cfg`),
    ``max_per_img`` (detections kept per image; <= 0: all). Defaults come from the config
    (``configs/_base_/models``), not from here.

    Raises:
        ValueError: a missing or unknown key, or a value out of range.
    """
    cfg = dict(test_cfg or {})
    unknown = sorted(set(cfg) - set(TEST_CFG_KEYS))
    missing = sorted(set(TEST_CFG_KEYS) - set(cfg))
    if unknown or missing:
        raise ValueError(f"{name}: test_cfg needs exactly the keys {list(TEST_CFG_KEYS)}; unknown {unknown}, "
                         f"missing {missing} (e.g. {{score_thr: 0.05, nms_pre: 1000, nms: {{iou_threshold: 0.5}}, "
                         f"max_per_img: 100}})")
    nms = check_nms_cfg(name, cfg["nms"])
    if not 0 < float(cfg["score_thr"]) < 1:
        raise ValueError(f"{name}: test_cfg.score_thr must be in (0, 1) (0 would make every pair a candidate, "
                         f"and the export marks non-candidates with score 0), got {cfg['score_thr']!r}")
    return dict(score_thr=float(cfg["score_thr"]), nms=nms, max_per_img=int(cfg["max_per_img"] or 0),
                nms_pre=int(cfg["nms_pre"] or 0))


def flatten_levels(outputs: Sequence[Tensor], channels: int) -> Tensor:
    """Per-level ``[B, A * channels, H_l, W_l]`` -> ``[B, sum_l H_l * W_l * A, channels]``, ordered level,
    row, column, anchor (torchvision's order, and :class:`AnchorGenerator`'s position-major, anchor-minor)."""
    flat = []
    for out in outputs:
        b, _, h, w = out.shape
        flat.append(out.view(b, -1, channels, h, w).permute(0, 3, 4, 1, 2).reshape(b, -1, channels))
    return torch.cat(flat, dim=1)


def level_candidates(scores: Tensor, level_maps: Sequence[Tensor], score_thr: float, nms_pre: int) -> Tensor:
    """Zero the (prior, class) pairs that are not candidates, per level, with fixed shapes.

    A pair is a candidate when its score is > ``score_thr`` and among the ``nms_pre`` best pairs of its image and
    level (torchvision's ``topk_candidates``, MMDetection's ``filter_scores_and_topk``); exact up to ties at the
    k-th score.

    Args:
        scores: float ``[B, N, C]`` (:func:`flatten_levels` order), N the priors of all levels.
        level_maps: per level the same scores in the head's own layout, e.g. ``[B, A * C, H_l, W_l]``. The k-th
            best score of a level is taken from this contiguous map (``flatten(1)`` is a view): a top-k over a
            slice of ``scores`` would make the exporter specialise the batch size to the example's.
        score_thr: the score threshold.
        nms_pre: per level, the most candidates (<= 0: no limit).

    Returns:
        float ``[B, N, C]``: ``scores`` where candidate, else 0.
    """
    c = scores.shape[-1]
    kths = []
    for level in level_maps:
        flat = level.flatten(1)  # [B, pairs]
        pairs = flat.shape[1]
        if 0 < nms_pre < pairs:
            kth = flat.topk(nms_pre, dim=1).values[:, -1:]
        else:
            kth = torch.zeros_like(flat[:, :1])
        kths.append(kth.expand(-1, pairs // c))
    kth = torch.cat(kths, dim=1)  # [B, N]: the k-th score of each prior's level
    keep = (scores > score_thr) & (scores >= kth.unsqueeze(-1))
    return torch.where(keep, scores, torch.zeros_like(scores))


def clip_to(boxes: Tensor, image_hw: Sequence[int]) -> Tensor:
    """``[..., 4]`` xyxy boxes clamped to ``[0, W] x [0, H]`` (traceable for symbolic sizes)."""
    h, w = image_hw
    return torch.stack([boxes[..., 0].clamp(0, w), boxes[..., 1].clamp(0, h), boxes[..., 2].clamp(0, w),
                        boxes[..., 3].clamp(0, h)], dim=-1)


def nms_predict(boxes: Tensor, scores: Tensor, metas: Sequence[dict[str, Any]], iou_threshold: float | dict[str, Any],
                max_per_img: int, rescale: bool) -> list[InstanceData]:
    """Per image: class-wise ``batched_nms`` (or soft-NMS) over the non-zero (prior, class) pairs, the
    ``max_per_img`` best.

    Args:
        boxes: float ``[B, N, 4]`` xyxy input pixels (``export_decode``'s).
        scores: float ``[B, N, C]``, 0 where not a candidate.
        metas: per image, ``scale_factor`` (w, h) and ``ori_shape`` for ``rescale``.
        iou_threshold: per-class NMS threshold, or the head's whole ``test_cfg.nms`` (:func:`check_nms_cfg`;
            ``type: soft_nms`` runs :func:`soft_nms_image`).
        max_per_img: detections kept (<= 0: all).
        rescale: map boxes to original-image pixels (``/ scale_factor``, clipped to ``ori_shape``).

    Returns:
        one ``InstanceData(bboxes [K, 4] float32, scores [K] float32, labels [K] int64)`` per image, by
        decreasing score.
    """
    nms = iou_threshold if isinstance(iou_threshold, dict) else dict(type="nms", iou_threshold=iou_threshold)
    results = []
    for i, meta in enumerate(metas):
        if nms.get("type") == "soft_nms":  # candidates: the non-zero pairs (scores are >= 0)
            det_boxes, det_scores, det_labels = soft_nms_image(boxes[i], scores[i], nms, 0.0, max_per_img, 0)
        else:
            prior_idx, labels = scores[i].nonzero(as_tuple=True)
            cand_scores = scores[i][prior_idx, labels].float()
            cand_boxes = boxes[i][prior_idx].float()
            keep = batched_nms(cand_boxes, cand_scores, labels, float(nms["iou_threshold"]))
            if max_per_img > 0:
                keep = keep[:max_per_img]
            det_boxes, det_scores, det_labels = cand_boxes[keep], cand_scores[keep], labels[keep]
        if rescale:
            sw, sh = meta.get("scale_factor", (1.0, 1.0))[:2]
            det_boxes = det_boxes / det_boxes.new_tensor([sw, sh, sw, sh])
            if "ori_shape" in meta:
                det_boxes = clip_boxes_to_image(det_boxes, tuple(int(v) for v in meta["ori_shape"][:2]))
        results.append(InstanceData(bboxes=det_boxes, scores=det_scores, labels=det_labels.long()))
    return results


def gather_gt(name: str, data_samples: Sequence[Any], num_classes: int, device: torch.device
              ) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """Per image: gt boxes float32 ``[M_i, 4]``, labels int64 ``[M_i]`` and ignored boxes ``[K_i, 4]``.

    Raises:
        DataError: a label outside ``[0, num_classes)``, naming the image.
    """
    boxes, labels, ignored = [], [], []
    for i, sample in enumerate(data_samples):
        gt = sample.gt_instances if "gt_instances" in sample else None
        if gt is None or "bboxes" not in gt:
            b, lb = torch.zeros((0, 4), device=device), torch.zeros((0,), dtype=torch.long, device=device)
        else:
            b = torch.as_tensor(gt.bboxes, device=device).float().reshape(-1, 4)
            lb = torch.as_tensor(gt.labels, device=device).long().reshape(-1)
        if lb.numel() and (int(lb.min()) < 0 or int(lb.max()) >= num_classes):
            where = sample.metainfo.get("img_path", f"sample {i}")
            raise DataError(f"{name}: gt labels must be in [0, {num_classes - 1}] (num_classes={num_classes}); "
                            f"got {sorted(set(lb.tolist()))} in {where}")
        ign = sample.ignored_instances if "ignored_instances" in sample else None
        has_ign = ign is not None and "bboxes" in ign
        ignored.append(torch.as_tensor(ign.bboxes, device=device).float().reshape(-1, 4) if has_ign
                       else torch.zeros((0, 4), device=device))
        boxes.append(b)
        labels.append(lb)
    return boxes, labels, ignored


def input_hw(metas: Sequence[dict[str, Any]], featmap_hw: Sequence[int], stride: int) -> tuple[int, int]:
    """(H, W) of the network input: ``batch_input_shape`` of the metainfo, else the first level's size times
    its stride."""
    shape = metas[0].get("batch_input_shape") if metas else None
    if shape:
        return int(shape[0]), int(shape[1])
    return int(featmap_hw[0]) * stride, int(featmap_hw[1]) * stride
