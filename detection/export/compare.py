"""Compare two sets of padded detections (num_dets, boxes, scores, labels) as sets, not element-wise.

Where it is used: the export self-check (ONNX Runtime vs the PyTorch graph, every detector, through
``DetectionCompare``) and the tests of the dense heads' graphs against their eager predict. Two-stage detectors
need no such comparison between their eager and exported forms: both are one implementation
(:mod:`detection.models.roi_heads.two_stage_infer`) and agree row for row.

Why as sets: two correct NMS implementations (torchvision's and ONNX Runtime's) may order equal-score detections
differently, and float noise of 1e-6 may flip a candidate that sits exactly on ``score_thr``, on the IoU threshold
or at the top-M cut. Element-wise ``allclose`` would then fail on a correct graph, or (with a loose tolerance) pass
a wrong one. Here every detection must have a partner (same label, IoU > ``min_iou`` or corners within
``box_atol`` px, score within ``score_atol``); a detection without one is tolerated only when such a borderline
case explains it, and only a few per image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from detection.evaluation.ap import iou_matrix

OUTPUT_NAMES = ("num_dets", "boxes", "scores", "labels")


@dataclass
class MatchSettings:
    """Tolerances of :func:`compare_detections` (thresholds are the model's ``test_cfg``)."""

    score_thr: float = 0.0
    iou_threshold: float = 0.5
    label_pad: int = -1
    min_iou: float = 0.99
    box_atol: float = 1e-2  # or every coordinate within this many pixels (degenerate, clipped boxes)
    score_atol: float = 1e-4
    iou_atol: float = 0.01  # IoU this close to iou_threshold counts as a borderline suppression
    explain_borderline: bool = True  # False: every detection must be matched
    max_unexplained_frac: float = 0.1  # borderline misses allowed per image: max(2, frac * num_dets)


def _as_tuple(outs: Sequence | Mapping) -> tuple[np.ndarray, ...]:
    if isinstance(outs, Mapping):
        missing = [n for n in OUTPUT_NAMES if n not in outs]
        if missing:
            raise KeyError(f"compare_detections: outputs {missing} missing; got {sorted(outs)}")
        outs = [outs[n] for n in OUTPUT_NAMES]
    if len(outs) != 4:
        raise ValueError(f"compare_detections: expected 4 outputs {OUTPUT_NAMES}, got {len(outs)}")
    return tuple(np.asarray(o.detach().cpu() if hasattr(o, "detach") else o) for o in outs)


def _fmt(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, i: int) -> str:
    return f"label {int(labels[i])} score {float(scores[i]):.6f} box {np.round(boxes[i], 2).tolist()}"


def _check_padding(tag: str, img: int, n: int, boxes, scores, labels, settings: MatchSettings) -> list[str]:
    errs = []
    m = len(scores)
    if not 0 <= n <= m:
        return [f"{tag} image {img}: num_dets={n} outside [0, {m}]"]
    if n < m and (np.any(scores[n:] != 0) or np.any(labels[n:] != settings.label_pad) or np.any(boxes[n:] != 0)):
        errs.append(
            f"{tag} image {img}: padding rows {n}..{m - 1} must be boxes 0, scores 0, labels {settings.label_pad}"
        )
    if n and (np.any(scores[:n] <= settings.score_thr) or np.any(np.diff(scores[:n]) > settings.score_atol)):
        errs.append(f"{tag} image {img}: the {n} valid scores must be > score_thr and sorted in decreasing order")
    if n and (np.any(labels[:n] < 0) or not np.all(np.isfinite(boxes[:n]))):
        errs.append(f"{tag} image {img}: valid rows have a negative label or a non-finite box")
    return errs


def _explained(
    d: int, own: tuple, other: tuple, own_unmatched: set, other_unmatched: set, cut: float | None, s: MatchSettings
) -> bool:
    """Whether detection ``d`` of ``own`` may lack a partner because of a borderline decision."""
    boxes, scores, labels = own
    score = float(scores[d])
    if abs(score - s.score_thr) <= s.score_atol:  # on the score threshold
        return True
    if cut is not None and score <= cut + s.score_atol:  # at the top-M cut
        return True
    for tag, (ob, os_, ol), unmatched in (("own", own, own_unmatched), ("other", other, other_unmatched)):
        same = [j for j in range(len(os_)) if ol[j] == labels[d] and not (tag == "own" and j == d)]
        if not same:
            continue
        ious = iou_matrix(boxes[d : d + 1], ob[same])[0]
        for j, iou in zip(same, ious):
            if float(os_[j]) <= score + s.score_atol:
                continue  # only a higher-scored box can suppress d (an equal score: d's own moved copy)
            if abs(iou - s.iou_threshold) <= s.iou_atol:  # borderline suppression
                return True
            if j in unmatched and iou > s.iou_threshold - s.iou_atol:  # cascade of a borderline difference
                return True
    return False


@dataclass
class MatchResult:
    """Outcome of :func:`compare_detections`; ``bool(result)`` is ``ok``."""

    ok: bool
    message: str  # the first differences, or a summary of the match
    matched: int = 0
    max_score_diff: float = 0.0  # over matched pairs
    max_box_diff: float = 0.0  # pixels, over matched pairs
    # (image, expected row, actual row) of every matched pair, e.g. to compare per-detection outputs (masks)
    pairs: list[tuple[int, int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.ok


def compare_detections(
    expected: Sequence | Mapping, actual: Sequence | Mapping, settings: MatchSettings | None = None
) -> MatchResult:
    """Match padded detections (num_dets [B], boxes [B, M, 4], scores [B, M], labels [B, M]) as sets.

    ``expected``/``actual``: 4 arrays or tensors in that order, or a mapping by those names.

    Returns:
        a :class:`MatchResult`; its message names the first differences (image, label, score, box) or, when ok,
        summarises the match (matched count, max score and box differences, tolerated borderline misses).
    """
    s = settings or MatchSettings()
    e_num, e_boxes, e_scores, e_labels = _as_tuple(expected)
    a_num, a_boxes, a_scores, a_labels = _as_tuple(actual)
    shapes_e = [x.shape for x in (e_num, e_boxes, e_scores, e_labels)]
    shapes_a = [x.shape for x in (a_num, a_boxes, a_scores, a_labels)]
    if shapes_e != shapes_a:
        return MatchResult(
            False, f"output shapes differ: expected {shapes_e}, got {shapes_a} (num_dets, boxes, scores, labels)"
        )
    if e_boxes.ndim != 3 or e_boxes.shape[-1] != 4 or e_num.ndim != 1:
        return MatchResult(
            False, f"outputs must be num_dets [B], boxes [B, M, 4], scores [B, M], labels [B, M]; got {shapes_a}"
        )
    errors: list[str] = []
    notes: list[str] = []
    all_pairs: list[tuple[int, int, int]] = []
    matched_total, max_ds, max_db = 0, 0.0, 0.0
    m = e_scores.shape[1]
    for img in range(e_num.shape[0]):
        ne, na = int(e_num[img]), int(a_num[img])
        for tag, n, b, sc, lb in (
            ("expected", ne, e_boxes, e_scores, e_labels),
            ("actual", na, a_boxes, a_scores, a_labels),
        ):
            errors += _check_padding(tag, img, n, b[img], sc[img], lb[img], s)
        if errors:
            break
        E = (e_boxes[img, :ne].astype(np.float64), e_scores[img, :ne].astype(np.float64), e_labels[img, :ne])
        A = (a_boxes[img, :na].astype(np.float64), a_scores[img, :na].astype(np.float64), a_labels[img, :na])
        iou = iou_matrix(E[0], A[0]) if ne and na else np.zeros((ne, na))
        near = np.abs(E[0][:, None, :] - A[0][None, :, :]).max(-1) <= s.box_atol if ne and na else iou > 1
        free = np.ones(na, dtype=bool)
        pairs = []
        for i in np.argsort(-E[1], kind="stable"):
            ok = free & (A[2] == E[2][i]) & ((iou[i] > s.min_iou) | near[i]) & (np.abs(A[1] - E[1][i]) <= s.score_atol)
            if ok.any():
                j = int(np.argmax(np.where(ok, iou[i] + near[i], -1.0)))
                free[j] = False
                pairs.append((int(i), j))
        un_e = set(range(ne)) - {i for i, _ in pairs}
        un_a = {j for j in range(na) if free[j]}
        matched_total += len(pairs)
        all_pairs += [(img, i, j) for i, j in pairs]
        for i, j in pairs:
            max_ds = max(max_ds, abs(E[1][i] - A[1][j]))
            max_db = max(max_db, float(np.abs(E[0][i] - A[0][j]).max()))
        if not un_e and not un_a:
            continue
        full = [sc[-1] for n, sc in ((ne, E[1]), (na, A[1])) if n == m and n > 0]
        cut = float(min(full)) if full else None
        unexplained = []
        if s.explain_borderline:
            unexplained += [("expected", i, E, A) for i in sorted(un_e) if not _explained(i, E, A, un_e, un_a, cut, s)]
            unexplained += [("actual", j, A, E) for j in sorted(un_a) if not _explained(j, A, E, un_a, un_e, cut, s)]
        else:
            unexplained = [("expected", i, E, A) for i in sorted(un_e)] + [("actual", j, A, E) for j in sorted(un_a)]
        allowed = max(2, int(s.max_unexplained_frac * max(ne, na)))
        if unexplained or len(un_e) + len(un_a) > allowed:
            lines = []
            for tag, d, own, other in (unexplained or [("expected", i, E, A) for i in sorted(un_e)])[:5]:
                line = f"  {tag} {_fmt(*own, d)} has no partner"
                if len(other[1]):
                    ious = iou_matrix(own[0][d : d + 1], other[0])[0]
                    k = int(np.argmax(ious))
                    line += f" (closest: IoU {ious[k]:.4f}, {_fmt(*other, k)})"
                lines.append(line)
            errors.append(
                f"image {img}: num_dets expected {ne}, actual {na}; {len(pairs)} matched, {len(un_e)} expected and "
                f"{len(un_a)} actual detections unmatched ({len(unexplained)} not explained by a borderline score, "
                f"IoU or top-{m} cut; at most {allowed} borderline misses allowed):\n" + "\n".join(lines)
            )
        else:
            notes.append(f"image {img}: {len(un_e) + len(un_a)} borderline detections unmatched")
    if errors:
        rule = f"same label, IoU > {s.min_iou} or boxes within {s.box_atol} px, |score diff| <= {s.score_atol}"
        message = f"detections differ (matched as sets: {rule}):\n" + "\n".join(errors[:10])
        return MatchResult(False, message, matched_total, max_ds, max_db, all_pairs)
    summary = f"{matched_total} detections matched; max |score diff| {max_ds:.2e}, max box diff {max_db:.2e} px"
    return MatchResult(True, "; ".join([summary, *notes]), matched_total, max_ds, max_db, all_pairs)


def pad_detections(
    per_image: Sequence[tuple], max_per_img: int, label_pad: int = -1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-image (boxes [K, 4], scores [K], labels [K]) (e.g. ``model.predict``'s ``pred_instances``) -> the
    padded exported layout, keeping each image's ``max_per_img`` best by score."""
    b = len(per_image)
    num = np.zeros(b, dtype=np.int64)
    boxes = np.zeros((b, max_per_img, 4), dtype=np.float32)
    scores = np.zeros((b, max_per_img), dtype=np.float32)
    labels = np.full((b, max_per_img), label_pad, dtype=np.int64)
    for i, (bx, sc, lb) in enumerate(per_image):
        bx, sc, lb = (np.asarray(x.detach().cpu() if hasattr(x, "detach") else x) for x in (bx, sc, lb))
        order = np.argsort(-sc, kind="stable")[:max_per_img]
        k = len(order)
        num[i] = k
        boxes[i, :k], scores[i, :k], labels[i, :k] = bx[order], sc[order], lb[order]
    return num, boxes, scores, labels


def detection_agreement(reference: Mapping, candidate: Mapping, min_iou: float = 0.5,
                        box_atol: float = MatchSettings.box_atol, tie_atol: float = 1e-6) -> dict[str, float | None]:
    """How well reduced-precision detections (FP16/INT8 graph, or another runtime) agree with the FP32 graph's,
    in [0, 1].

    ``detections_recall``: the share of the reference detections found again (same label, IoU >= ``min_iou`` or
    every corner within ``box_atol`` px: the self-check's rule, since a box clipped to zero width or height has
    IoU 0 even with itself, and random weights give many such boxes), each weighted by its score, so a borderline
    detection that flips costs little and a confident one that is lost costs much; ``detections_precision``: the
    same from the candidate's side (spurious detections).

    Ties (:func:`_split_ties`): where several detections share a score (within ``tie_atol``: float noise), which of them
    survive NMS and the top-M cut depends on the order a runtime sorts equals in, not on the model; a group of
    equal scores found on both sides, with two or more on one side and a member without a partner, is left out of
    both measures (random weights give whole images of equal scores: SSDLite's 1/81 everywhere).

    ``None`` (not measured) where there is nothing to count: recall when the reference found nothing (or only
    split ties), precision when the candidate did. Two graphs that both find nothing have not been shown to agree
    (1.0 would hide a check on images without objects, or an INT8 graph compared on blank input).
    """
    ref, cand = _as_tuple(reference), _as_tuple(candidate)
    found = {"detections_recall": [0.0, 0.0], "detections_precision": [0.0, 0.0]}  # [matched score, total score]
    for i in range(ref[0].shape[0]):
        r = [o[i][: int(ref[0][i])] for o in ref[1:]]
        c = [o[i][: int(cand[0][i])] for o in cand[1:]]
        iou = iou_matrix(r[0], c[0])
        close = np.abs(r[0][:, None, :] - c[0][None, :, :]).max(-1, initial=0.0) <= box_atol
        same = ((iou >= min_iou) | close) & (r[2][:, None] == c[2][None, :])
        hits = (same.any(1), same.any(0))
        keep = _split_ties(r[1], c[1], *hits, tie_atol)
        for key, scores, hit, kept in zip(found, (r[1], c[1]), hits, keep):
            found[key][0] += float(scores[hit & kept].sum())
            found[key][1] += float(scores[kept].sum())
    return {k: (m / t if t > 0 else None) for k, (m, t) in found.items()}


def _split_ties(ref_scores: np.ndarray, cand_scores: np.ndarray, ref_hit: np.ndarray, cand_hit: np.ndarray,
                tie_atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Which reference / candidate detections count in :func:`detection_agreement` (boolean masks).

    Scores of both sides are grouped where sorted neighbours are within ``tie_atol``; a group with members on
    both sides, two or more on one side, and a member without a partner is a tie that the runtimes broke
    differently (NMS keeps the first of equals, the top-M cut the first M): its members do not count. A lone
    detection without a partner still counts: no tie explains it.
    """
    scores = np.concatenate([ref_scores, cand_scores]).astype(np.float64)
    side = np.repeat([0, 1], [len(ref_scores), len(cand_scores)])
    hit = np.concatenate([ref_hit, cand_hit])
    order = np.argsort(scores, kind="stable")
    group = np.empty(len(scores), dtype=np.int64)
    group[order] = np.concatenate([[0], np.cumsum(np.diff(scores[order]) > tie_atol)]) if len(scores) else []
    keep = np.ones(len(scores), dtype=bool)
    for g in np.unique(group):
        members = group == g
        n_ref, n_cand = int((members & (side == 0)).sum()), int((members & (side == 1)).sum())
        if n_ref and n_cand and max(n_ref, n_cand) >= 2 and not hit[members].all():
            keep[members] = False
    return keep[: len(ref_scores)], keep[len(ref_scores):]


@dataclass
class MaskMatch:
    """Outcome of :func:`compare_masks` over matched detection pairs."""

    count: int  # pairs compared
    max_abs_diff: float  # of the mask probabilities
    min_iou: float  # of the binary masks (probability >= threshold); 1.0 for two empty masks


def compare_masks(expected: np.ndarray, actual: np.ndarray, pairs: Sequence[tuple[int, int, int]],
                  threshold: float = 0.5) -> MaskMatch:
    """Per-detection mask probabilities ``[B, M, h, w]`` of matched pairs (``MatchResult.pairs``: image,
    expected row, actual row) compared: max abs difference and the least IoU of the ``>= threshold`` masks.

    Why on pairs: rows of two correct graphs may come in another order (equal scores), so mask ``i`` of one is
    compared with the mask of the detection that matched it in the other.
    """
    if not len(pairs):
        return MaskMatch(0, 0.0, 1.0)
    idx = np.asarray(pairs, dtype=np.int64)
    e = np.asarray(expected)[idx[:, 0], idx[:, 1]].astype(np.float64)
    a = np.asarray(actual)[idx[:, 0], idx[:, 2]].astype(np.float64)
    eb, ab = e >= threshold, a >= threshold
    inter = (eb & ab).reshape(len(idx), -1).sum(1)
    union = (eb | ab).reshape(len(idx), -1).sum(1)
    iou = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    return MaskMatch(len(idx), float(np.abs(e - a).max()), float(iou.min()))
