"""ByteTrack in the runtime (oars_deploy.track): the Kalman filter against hand-computed numbers, the assignment
against scipy / brute force, and a synthetic scene (two boxes crossing, one occluded with low scores for a few frames,
one leaving for good) whose ids must hold and never be reused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from oars_deploy.errors import DeployError
from oars_deploy.track import ByteTracker, KalmanBoxFilter, TrackerConfig, box_iou, linear_assignment
from oars_deploy.track.draw import draw_tracks, id_colours
from oars_deploy.track.kalman import xyah_to_xyxy, xyxy_to_xyah
from oars_deploy.track.matching import min_cost_assignment


def test_kalman_initiate_predict_update_match_hand_computed_numbers():
    kf = KalmanBoxFilter()  # std weights 1/20 (position), 1/160 (velocity)
    mean, cov = kf.initiate(np.array([[10.0, 20.0, 0.5, 40.0]]))
    # h = 40: position std 2 * 40 / 20 = 4, velocity std 10 * 40 / 160 = 2.5; aspect 1e-2 / 1e-5
    np.testing.assert_allclose(mean[0], [10, 20, 0.5, 40, 0, 0, 0, 0])
    np.testing.assert_allclose(np.diag(cov[0]), [16, 16, 1e-4, 16, 6.25, 6.25, 1e-10, 6.25])
    mean, cov = kf.predict(mean, cov)
    # F P F^T: position var 16 + 6.25, position-velocity covariance 6.25; Q: (40/20)^2 = 4, (40/160)^2 = 0.0625
    np.testing.assert_allclose(mean[0], [10, 20, 0.5, 40, 0, 0, 0, 0])
    assert cov[0, 0, 0] == pytest.approx(26.25) and cov[0, 0, 4] == pytest.approx(6.25)
    assert cov[0, 4, 4] == pytest.approx(6.3125) and cov[0, 2, 2] == pytest.approx(2e-4 + 1e-10)
    mean, cov = kf.update(mean, cov, np.array([[12.0, 20.0, 0.5, 40.0]]))
    # measurement var (40/20)^2 = 4: S = 30.25; gains 26.25 / 30.25 (position), 6.25 / 30.25 (velocity)
    assert mean[0, 0] == pytest.approx(10 + 2 * 26.25 / 30.25) and mean[0, 4] == pytest.approx(2 * 6.25 / 30.25)
    assert mean[0, 1] == pytest.approx(20) and mean[0, 5] == pytest.approx(0)
    assert cov[0, 0, 0] == pytest.approx(26.25 * 4 / 30.25)
    assert cov[0, 4, 4] == pytest.approx(6.3125 - 6.25 ** 2 / 30.25)


def test_kalman_moves_by_the_velocity_and_boxes_round_trip():
    kf = KalmanBoxFilter()
    mean = np.array([[10.0, 20.0, 0.5, 40.0, 1.0, -2.0, 0.0, 0.5]] * 2)
    cov = np.stack([np.eye(8)] * 2)
    new_mean, _ = kf.predict(mean, cov)
    np.testing.assert_allclose(new_mean[:, :4], [[11, 18, 0.5, 40.5]] * 2)
    boxes = np.array([[0.0, 0.0, 20.0, 40.0], [5.0, 10.0, 8.0, 12.0]])
    np.testing.assert_allclose(xyxy_to_xyah(boxes)[0], [10, 20, 0.5, 40])
    np.testing.assert_allclose(xyah_to_xyxy(xyxy_to_xyah(boxes)), boxes)


def test_assignment_is_optimal_and_respects_the_cost_limit():
    rng = np.random.default_rng(0)
    for _ in range(40):
        n, m = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        cost = rng.random((n, m))
        if n <= m:  # complete assignment: the brute-force optimum
            rows, cols = min_cost_assignment(cost)
            best = min(sum(cost[i, p[i]] for i in range(n)) for p in itertools.permutations(range(m), n))
            assert cost[rows, cols].sum() == pytest.approx(best)
        limit = 0.5
        matches, ur, uc = linear_assignment(cost, limit)
        assert np.all(cost[matches[:, 0], matches[:, 1]] <= limit)
        assert sorted([*matches[:, 0], *ur]) == list(range(n)) and sorted([*matches[:, 1], *uc]) == list(range(m))
        got = cost[matches[:, 0], matches[:, 1]].sum() + limit / 2 * (len(ur) + len(uc))
        brute = min(  # every partial matching: matched pairs plus limit / 2 per unmatched row and column
            sum(cost[i, j] for i, j in pairs) + limit / 2 * (n + m - 2 * len(pairs))
            for k in range(min(n, m) + 1) for rs in itertools.combinations(range(n), k)
            for cs in itertools.permutations(range(m), k) for pairs in [list(zip(rs, cs))])
        assert got == pytest.approx(brute)
    empty = linear_assignment(np.zeros((0, 3)), 0.8)
    assert empty[0].shape == (0, 2) and empty[2].tolist() == [0, 1, 2]


def test_assignment_agrees_with_scipy_on_larger_matrices():
    scipy_opt = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(1)
    for n, m in ((12, 12), (7, 15), (30, 30)):
        cost = rng.random((n, m))
        rows, cols = min_cost_assignment(cost)
        r2, c2 = scipy_opt.linear_sum_assignment(cost)
        assert cost[rows, cols].sum() == pytest.approx(cost[r2, c2].sum())


def test_box_iou():
    iou = box_iou(np.array([[0, 0, 10, 10]]), np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30],
                                                      [3, 3, 3, 3]]))
    np.testing.assert_allclose(iou, [[1.0, 1 / 3, 0.0, 0.0]])


def _scene(frames: int = 40) -> list[tuple[np.ndarray, np.ndarray, list[str]]]:
    """Per frame: boxes, scores and which object each box is. A moves right and B left, crossing with a vertical
    offset near frame 18; C stands still and is occluded (score 0.3) in frames 10-14, unseen in 15-17; D is seen
    in frames 0-7 only and comes back at frame 30 (after the lost-track buffer)."""
    out = []
    for t in range(frames):
        boxes, scores, who = [], [], []
        boxes.append([8 * t, 50, 8 * t + 40, 130]); scores.append(0.9); who.append("A")  # noqa: E702
        boxes.append([300 - 8 * t, 70, 340 - 8 * t, 150]); scores.append(0.85); who.append("B")  # noqa: E702
        if not 15 <= t <= 17:
            boxes.append([400, 300, 440, 380]); scores.append(0.3 if 10 <= t <= 14 else 0.8); who.append("C")  # noqa
        if t <= 7 or t >= 30:
            boxes.append([600, 20, 630, 60]); scores.append(0.95); who.append("D")  # noqa: E702
        out.append((np.array(boxes, np.float64), np.array(scores), who))
    return out


def test_synthetic_scene_keeps_ids_through_crossing_and_occlusion_and_never_reuses_them():
    tracker = ByteTracker(TrackerConfig(track_buffer=8), frame_rate=30.0)  # lost tracks kept 8 frames
    ids: dict[str, list[int]] = {}
    for t, (boxes, scores, who) in enumerate(_scene()):
        assigned = tracker.update(boxes, scores, np.zeros(len(boxes), np.int64))
        for name, tid in zip(who, assigned):
            ids.setdefault(name, []).append(int(tid))
        if 10 <= t <= 14:  # the occluded box keeps its track through the low-score frames (second association)
            assert assigned[who.index("C")] == ids["C"][0]
    assert set(ids["A"]) == {ids["A"][0]} and set(ids["B"]) == {ids["B"][0]}  # crossing: no switch
    assert set(ids["C"]) == {ids["C"][0]}  # back after 3 unseen frames: found again, same id
    first_d, later_d = ids["D"][:8], ids["D"][8:]
    assert set(first_d) == {first_d[0]}
    # D came back after 22 frames (> the buffer): a new id, and never one given before; first frame unconfirmed
    assert later_d[0] == -1 and set(later_d[1:]) == {5}
    assert sorted({ids["A"][0], ids["B"][0], ids["C"][0], first_d[0]}) == [1, 2, 3, 4]


def test_low_scores_alone_start_no_track_and_ids_need_two_frames_after_the_first():
    tracker = ByteTracker(TrackerConfig())
    box = np.array([[10.0, 10.0, 50.0, 90.0]])
    assert tracker.update(box, np.array([0.4])).tolist() == [-1]  # below track_thresh: no birth
    assert tracker.update(box, np.array([0.55])).tolist() == [-1]  # below track_thresh + margin: no birth
    assert tracker.update(box, np.array([0.9])).tolist() == [-1]  # born unconfirmed (not the first frame)
    assert tracker.update(box + 2, np.array([0.9])).tolist() == [1]  # confirmed by its second frame
    assert tracker.update(np.zeros((0, 4)), np.zeros(0)).tolist() == []
    assert [t.state for t in tracker.tracks] == ["lost"]


def test_config_refuses_bad_values():
    with pytest.raises(DeployError, match="track_thresh: got 1.5; expected a number in \\[0, 1\\]"):
        TrackerConfig(track_thresh=1.5)
    with pytest.raises(DeployError, match="track_buffer"):
        TrackerConfig(track_buffer=-1)
    assert TrackerConfig(track_buffer=30).max_time_lost(15.0) == 15


def test_draw_tracks_colours_by_id_and_skips_untracked():
    img = np.zeros((60, 80, 3), np.uint8)
    boxes = np.array([[5, 5, 30, 30], [40, 10, 70, 50]], np.float64)
    out = draw_tracks(img, boxes, np.array([3, -1]), np.array([0, 0]), np.array([0.9, 0.2]), ["car"])
    assert out[5, 15].tolist() == id_colours(np.array([3]))[0, ::-1].tolist()  # top edge of box 0, id 3's colour
    assert not out[30:50, 69].any()  # the untracked box is not drawn
    assert len({tuple(c) for c in id_colours(np.arange(1, 9))}) == 8
    np.testing.assert_array_equal(id_colours(np.array([7])), id_colours(np.array([7])))
    none = draw_tracks(img, boxes, np.array([-1, -1]), np.array([0, 0]), np.array([0.9, 0.2]), ["car"])
    assert not none.any() and id_colours(np.zeros(0)).shape == (0, 3)  # a frame without tracks: drawn bare
