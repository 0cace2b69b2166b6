"""ClassAwareSampler: PaddleDetection's image weights against their closed form, frequencies under a fixed seed
(a rare class drawn about as often as a common one), determinism, exact mid-epoch resume through mmengine's
fast-forward, the rank split of one global draw, the mmdet mode, and the errors; the datasets' ``get_cat_ids``
on the generated demo shapes (COCO boxes and label maps describe the same shapes)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from mmengine.runner.loops import _InfiniteDataloaderIterator
from torch.utils.data import DataLoader

import oars.data.samplers  # noqa: F401  (registers ClassAwareSampler)
from oars.data.samplers import ClassAwareSampler, class_aware_weights, image_class_pairs
from oars.data.samplers.class_aware import NoClassImageWarning
from oars.errors import DataError
from oars.registry import DATA_SAMPLERS


class Cats:
    """A dataset that is only its images' class ids (and returns its index as the sample)."""

    def __init__(self, cat_ids: list[list[int]]) -> None:
        self.cat_ids = cat_ids

    def __len__(self) -> int:
        return len(self.cat_ids)

    def __getitem__(self, idx: int) -> int:
        return idx

    def get_cat_ids(self, idx: int) -> list[int]:
        return self.cat_ids[idx]


# 0: four images hold class 0, one of them also class 1; class 1 twice; class 2 in one image, listed twice.
HAND = [[0], [0], [0], [0, 1], [1], [2, 2]]


def test_weights_closed_form():
    # n_0 = 4, n_1 = 2, n_2 = 1: w = 1/4, 1/4, 1/4, 1/4 + 1/2, 1/2, 1/1
    np.testing.assert_allclose(class_aware_weights(HAND), [0.25, 0.25, 0.25, 0.75, 0.5, 1.0])
    image, cls = image_class_pairs(HAND)
    assert image.tolist() == [0, 1, 2, 3, 3, 4, 5] and cls.tolist() == [0, 0, 0, 0, 1, 1, 2]
    # every class brings a total weight of 1 (n_c images times 1/n_c): 3 classes, 3 in all
    assert class_aware_weights(HAND).sum() == pytest.approx(3.0)


def _long_tail(rare_images: int = 10, common_images: int = 100) -> list[list[int]]:
    return [[0]] * common_images + [[1]] * rare_images


@pytest.mark.parametrize("mode", ["paddle", "mmdet"])
def test_rare_class_drawn_as_often_as_the_common_one(mode):
    cats = _long_tail()
    sampler = ClassAwareSampler(Cats(cats), mode=mode, seed=0)
    epochs = []
    for epoch in range(20):  # 20 epochs of 110
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
    draws = np.concatenate(epochs)
    rare = (draws >= 100).mean()
    assert abs(rare - 0.5) < 0.03, rare  # uniform sampling: 10 / 110 = 0.09
    plain = np.random.default_rng(0).integers(110, size=draws.size)
    assert (plain >= 100).mean() < 0.12


def test_paddle_frequencies_follow_the_weights():
    sampler = ClassAwareSampler(Cats(HAND), seed=3)
    draws = np.concatenate([sampler.global_draw(e) for e in range(3000)])
    freq = np.bincount(draws, minlength=len(HAND)) / draws.size
    np.testing.assert_allclose(freq, class_aware_weights(HAND) / class_aware_weights(HAND).sum(), atol=0.01)


def test_mmdet_mode_picks_a_class_then_an_image():
    sampler = ClassAwareSampler(Cats(HAND), mode="mmdet", seed=3)
    draws = np.concatenate([sampler.global_draw(e) for e in range(3000)])
    freq = np.bincount(draws, minlength=len(HAND)) / draws.size
    # class 0 (1/3) over 4 images, class 1 (1/3) over images 3 and 4, class 2 (1/3) image 5
    expected = [1 / 12, 1 / 12, 1 / 12, 1 / 12 + 1 / 6, 1 / 6, 1 / 3]
    np.testing.assert_allclose(freq, expected, atol=0.01)


def test_deterministic_under_the_seed_and_varies_by_epoch():
    a, b = ClassAwareSampler(Cats(_long_tail()), seed=7), ClassAwareSampler(Cats(_long_tail()), seed=7)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(ClassAwareSampler(Cats(_long_tail()), seed=8)) != first
    assert len(a) == 110 and len(first) == 110


def test_resume_mid_epoch_gives_the_same_remaining_order():
    full = ClassAwareSampler(Cats(_long_tail()), seed=1)
    full.set_epoch(4)
    order = list(full)
    resumed = ClassAwareSampler(Cats(_long_tail()), seed=1)
    resumed.set_epoch(4)
    resumed.skip(37)
    assert list(resumed) == order[37:]
    assert list(resumed) == order  # the skip applies once
    with pytest.raises(ValueError, match="infinite=True"):
        resumed.skip(111)


def test_infinite_stream_resumes_through_mmengine_fast_forward():
    """An iteration-based loop's iterator (mmengine) fast-forwards the sampler with ``skip``: the batches after
    the resume point equal the uninterrupted run's, across an epoch boundary."""
    def loader() -> DataLoader:
        sampler = DATA_SAMPLERS.build(dict(type="ClassAwareSampler", infinite=True),
                                      default_args=dict(dataset=Cats(_long_tail()), seed=5))
        return DataLoader(Cats(_long_tail()), batch_size=4, sampler=sampler, collate_fn=list)

    uninterrupted = _InfiniteDataloaderIterator(loader())
    batches = [next(uninterrupted) for _ in range(40)]  # 160 samples: past the first epoch of 110
    resumed = _InfiniteDataloaderIterator(loader())
    resumed.skip_iter(25)
    assert [next(resumed) for _ in range(15)] == batches[25:]
    stream = list(itertools.islice(iter(loader().sampler), 220))
    epochs = loader().sampler
    assert stream == [int(i) for i in np.concatenate([epochs.global_draw(0), epochs.global_draw(1)])]


def test_ranks_split_one_global_draw(monkeypatch):
    import oars.data.samplers.class_aware as module

    cats = _long_tail(rare_images=3, common_images=8)  # 11 images on 4 ranks: 3 each, 12 drawn
    parts = []
    for rank in range(4):
        monkeypatch.setattr(module, "get_dist_info", lambda rank=rank: (rank, 4))
        sampler = ClassAwareSampler(Cats(cats), seed=2)
        sampler.set_epoch(3)
        assert len(sampler) == 3
        parts.append(list(sampler))
    draw = sampler.global_draw(3)
    assert draw.size == 12
    for rank, part in enumerate(parts):
        assert part == draw[rank::4].tolist()
    positions = sorted(p for rank in range(4) for p in range(rank, 12, 4))
    assert positions == list(range(12))  # every position of the draw on exactly one rank


def test_images_without_classes_are_never_drawn_and_warned():
    with pytest.warns(NoClassImageWarning, match="2 of 5 images contain no class"):
        sampler = ClassAwareSampler(Cats([[0], [], [1], [], [0]]), seed=0)
    assert sampler.weights.tolist() == [0.5, 0.0, 1.0, 0.0, 0.5]
    draws = np.concatenate([sampler.global_draw(e) for e in range(50)])
    assert not np.isin(draws, [1, 3]).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ClassAwareSampler(Cats(HAND), seed=0)  # no empty image: no warning


def test_errors():
    with pytest.raises(DataError, match=r"mode='uniform' is not supported; accepted: \['paddle', 'mmdet'\]"):
        ClassAwareSampler(Cats(HAND), mode="uniform", seed=0)
    with pytest.raises(DataError, match="the dataset list has no get_cat_ids"):
        ClassAwareSampler([1, 2, 3], seed=0)
    with pytest.raises(DataError, match="none of the 2 images of Cats contains a class"):
        ClassAwareSampler(Cats([[], []]), seed=0)
    with pytest.raises(DataError, match="class ids must be >= 0"):
        ClassAwareSampler(Cats([[0], [-1]]), seed=0)
    with pytest.raises(ValueError, match="skip"):
        ClassAwareSampler(Cats(HAND), seed=0).skip(-1)
