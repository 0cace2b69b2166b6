"""The runtime decoder's candidate step keeps exactly k per class / level when scores tie, as ONNX TopK does (the
lower index wins), so a model with flat scores costs the NMS no more than the exported graph would."""

from __future__ import annotations

import numpy as np

from oars_deploy.predictors.detection_boxes.decode import select, top_k_mask


def test_top_k_mask_breaks_ties_toward_the_lower_index():
    values = np.asarray([[0.5, 0.9, 0.5, 0.5, 0.1]], np.float32)
    assert top_k_mask(values, 3, 1).tolist() == [[True, True, True, False, False]]
    assert top_k_mask(values, 1, 1).tolist() == [[False, True, False, False, False]]
    assert top_k_mask(values, 5, 1).all() and top_k_mask(values, 9, 1).all()


def test_top_k_mask_matches_a_stable_sort_on_random_ties():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 4, size=(2, 50, 3)).astype(np.float32)  # many ties
    mask = top_k_mask(values, 7, 1)
    for b in range(2):
        for c in range(3):
            expected = np.argsort(-values[b, :, c], kind="stable")[:7]
            assert sorted(np.flatnonzero(mask[b, :, c])) == sorted(expected)


def test_flat_scores_give_k_candidates_per_class_not_every_prior():
    """Every score 1/91 (a random-weight SSD): 300 per class reach the NMS, not all 3000 priors."""
    flat = np.full((1, 3000, 90), 1 / 91, np.float32)
    kept = select([flat[:, :1000], flat[:, 1000:]], {"per_class_top_k": 300}, 0.001)
    assert ((kept > 0).sum(axis=1) == 300).all()
    assert (kept[0, :300] > 0).all() and not (kept[0, 300:] > 0).any()  # the lower indices, as ONNX TopK


def test_flat_scores_give_k_candidates_per_level():
    levels = [np.full((2, 40, 5), 0.3, np.float32), np.full((2, 10, 5), 0.3, np.float32)]
    kept = select(levels, {"per_level_top_k": 60}, 0.05)
    assert (kept[:, :40] > 0).sum(axis=(1, 2)).tolist() == [60, 60]
    assert (kept[:, 40:] > 0).sum(axis=(1, 2)).tolist() == [50, 50]  # a level with fewer pairs keeps them all
