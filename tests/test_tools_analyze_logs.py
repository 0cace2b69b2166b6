"""tools/analyze_logs.py plot_curve / cal_train_time on scalar logs in mmengine's format (the lines below were
copied in shape from a 2-epoch demo training: <work_dir>/<timestamp>/vis_data/scalars.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import pytest
from demo_utils import ROOT

from oars.analysis.logs import format_train_time, load_run, plot_curves, train_time
from oars.errors import OarsError


def _write_run(folder, stamp: str, epochs: range, iters_per_epoch: int, time_of_epoch: dict[int, float]) -> None:
    """Training lines (loss, lr, time, epoch, iter, step) and one validation line (mIoU, step = epoch) per epoch."""
    vis = folder / stamp / "vis_data"
    vis.mkdir(parents=True)
    lines = []
    for epoch in epochs:
        for k in range(iters_per_epoch):
            it = (epoch - 1) * iters_per_epoch + k + 1
            first = 5.0 if k == 0 else 0.0  # each epoch's first iteration is slow (loader start-up)
            lines.append({"lr": 0.01, "data_time": 0.01, "loss": 2.0 / it, "decode.loss_ce": 1.0 / it,
                          "time": time_of_epoch[epoch] + first, "epoch": epoch, "iter": it, "step": it})
        lines.append({"aAcc": 50.0 + epoch, "mIoU": 10.0 * epoch, "data_time": 0.01, "time": 0.07, "step": epoch})
    (vis / "scalars.json").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("logs")
    _write_run(root / "run_a", "20260101_000000", range(1, 4), 4, {1: 0.2, 2: 0.3, 3: 0.1})
    # run_b was resumed: epoch 2 logged by both runs (the later one wins), epoch 3 only by the second
    _write_run(root / "run_b", "20260101_000000", range(1, 3), 4, {1: 0.5, 2: 9.0})
    _write_run(root / "run_b", "20260102_000000", range(2, 4), 4, {2: 0.4, 3: 0.4})
    return root


def test_plot_curve_from_the_command_line(runs):
    """As a user runs it: relative run folders and output file, two runs overlaid, train and val keys."""
    cmd = [sys.executable, os.path.join(ROOT, "tools/analyze_logs.py"), "plot_curve", "run_a", "run_b",
           "--keys", "loss", "mIoU", "--out", "curves.png", "--legend", "A", "B"]
    proc = subprocess.run(cmd, cwd=runs, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    img = cv2.imread(str(runs / "curves.png"))
    assert img is not None and img.shape[0] > img.shape[1] // 2  # two panels stacked
    before = (runs / "curves.png").read_bytes()
    with pytest.raises(OarsError, match="exists; give another file or --overwrite"):
        plot_curves([load_run(str(runs / "run_a"))], ["loss"], str(runs / "curves.png"))
    assert (runs / "curves.png").read_bytes() == before
    plot_curves([load_run(str(runs / "run_a"))], ["loss"], str(runs / "curves.png"), overwrite=True)
    assert (runs / "curves.png").read_bytes() != before


def test_series_use_iterations_for_training_and_epochs_for_validation(runs):
    b = load_run(str(runs / "run_b"))
    x, y, label = b.series("loss")
    assert label == "iteration" and x.tolist() == list(range(1, 13)) and y[0] == 2.0
    x, y, label = b.series("mIoU")
    assert label == "epoch" and x.tolist() == [1, 2, 3] and y.tolist() == [10.0, 20.0, 30.0]
    assert len(b.files) == 2


def test_cal_train_time(runs):
    t = train_time(load_run(str(runs / "run_b")))
    # the resumed epoch 2 (0.4 s) replaced the first run's (9.0 s); first iterations of epochs left out
    assert t.per_epoch == pytest.approx({1: 0.5, 2: 0.4, 3: 0.4})
    text = format_train_time(t)
    assert "slowest epoch 1, average time is 0.5000" in text and "fastest epoch 2" in text
    assert train_time(load_run(str(runs / "run_a")), include_outliers=True).mean == pytest.approx(
        (4 * 0.2 + 4 * 0.3 + 4 * 0.1 + 3 * 5.0) / 12)


def test_errors_name_the_run_and_the_available_keys(runs, tmp_path):
    with pytest.raises(OarsError, match=r"key\(s\) mAP not in its logs .*available keys: aAcc, data_time, "
                                        r"decode.loss_ce, loss, lr, mIoU, time"):
        plot_curves([load_run(str(runs / "run_a"))], ["mAP"], str(tmp_path / "x.png"))
    with pytest.raises(OarsError, match="no scalar logs found"):
        load_run(str(tmp_path))
    with pytest.raises(OarsError, match="--legend: 3 names"):
        plot_curves([load_run(str(runs / "run_a"))], ["loss"], str(tmp_path / "x.png"), legend=["a", "b", "c"])
    assert not (tmp_path / "x.png").exists()
