"""The Evaluate room through its routes: an evaluation's metrics, per-class table, worst images, confusion matrix and
embedded report read back from the files an evaluation writes; its running / failed states; each refusal; and (slow)
a real evaluation of a tiny trained run, started from the page, plus one that fails with the pipeline's message."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from oars.evaluation.confusion_cells import CELLS_FILE, read_cells, write_cells
from oars.studio.background import wait_for, write_status
from oars.studio.evaluations import confusion, read_report
from oars.visualization import ReportSection, write_html_report
from oars.visualization.html_report import confusion_section
from tests.studio.conftest import csrf_headers
from tests.studio.tiny_run import tiny_trained_run


def _fake_run(root: Path) -> Path:
    """A run folder as training leaves it (config.yaml, checkpoints) with one finished evaluation of epoch_1."""
    run = root / "fake_run"
    (run / "eval" / "epoch_1").mkdir(parents=True)
    (run / "config.yaml").write_text("default_scope: x\n")
    for name in ("epoch_1.pth", "best_acc_epoch_1.pth"):
        (run / name).write_bytes(b"weights")
    folder = run / "eval" / "epoch_1"
    (folder / "metrics.json").write_text(json.dumps({
        "checkpoint": str(run / "epoch_1.pth"), "metrics": {"mIoU": 0.5, "aAcc": 0.75},
        "details": {"IoUMetric per class": {"header": ["class", "IoU"], "rows": [["cat", 0.25], ["dog", None]]}}}))
    red = np.zeros((40, 60, 3), np.uint8)
    red[..., 2] = 255
    write_html_report(folder / "report.html", "Test report", [
        ReportSection("Metrics", tables=[{"header": ["metric", "value"], "rows": [["mIoU", 0.5]]}]),
        confusion_section(np.array([[5, 1], [2, 7]]), ["cat", "dog"], "Confusion matrix (pixels)", "gt \\ pred",
                          "Rows: ground truth."),
        ReportSection("Worst images (up to 2)", text="Lowest first.",
                      images=[("b.png: mIoU 0.100", red), ("a.png: mIoU 0.400", red // 2)])])
    return run


@pytest.fixture
def eval_client(client, tmp_path):
    run = _fake_run(tmp_path)
    run_id = client.app.state.workspace.register_run(run)
    return client, run_id, run


def test_evaluation_page_shows_what_the_evaluation_wrote(eval_client):
    client, run_id, _ = eval_client
    page = client.get(f"/runs/{run_id}/evaluate")
    assert page.status_code == 200
    text = page.text
    assert "Checkpoint epoch_1" in text and "0.5000" in text and "IoUMetric per class" in text and "n/a" in text
    assert "b.png: mIoU 0.100" in text and text.index("b.png: mIoU 0.100") < text.index("a.png: mIoU 0.400")
    assert '<table id="confusion">' in text and "gt \\ pred" in text and "not clickable" in text
    assert f"no {CELLS_FILE}" in text and "evaluate the checkpoint again" in text  # made before the cells existed
    assert "/evaluate/cell?" not in text
    assert f'src="/runs/{run_id}/evaluate/epoch_1/report.html"' in text
    options = text[text.index('<select name="checkpoint">'):]
    assert options.index("best_acc_epoch_1") < options.index(">epoch_1<")  # best first
    worst = client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/0.png")
    assert worst.status_code == 200 and worst.content[:4] == b"\x89PNG"
    assert "b.png: mIoU 0.100" in client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/0").text
    assert client.get(f"/runs/{run_id}/evaluate/epoch_1/confusion.png").status_code == 200
    report = client.get(f"/runs/{run_id}/evaluate/epoch_1/report.html")
    assert report.status_code == 200 and "default-src 'none'" in report.headers["content-security-policy"]


def _plant_cells(run: Path) -> Path:
    """Cells of epoch_1's evaluation: b.png (the report's worst picture) and d.png (an image in the run folder) and
    one image outside every root, planted in (gt dog, predicted cat)."""
    folder = run / "eval" / "epoch_1"
    inside = run / "images" / "d.png"
    inside.parent.mkdir()
    cv2.imwrite(str(inside), np.full((30, 20, 3), 200, np.uint8))
    write_cells(folder / CELLS_FILE, ["cat", "dog"], "pixels", [
        ("/elsewhere/data/b.png", np.array([[3, 0], [2, 4]])), (str(inside), np.array([[2, 1], [0, 3]])),
        ("/outside/c.png", [(0, 0, 0)])])
    (folder / "show").mkdir()
    return inside


def test_a_cell_lists_its_images(eval_client):
    client, run_id, run = eval_client
    inside = _plant_cells(run)
    text = client.get(f"/runs/{run_id}/evaluate").text
    assert "not clickable" not in text and "Counts of pixels; rows ground truth, columns prediction" in text
    cell = f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&amp;i=1&amp;j=0"
    assert f'<a href="{cell}" title="dog → cat" data-confused>2</a>' in text  # the non-zero off-diagonal cell links
    listed = client.get(cell.replace("&amp;", "&"))
    assert listed.status_code == 200
    assert "Ground truth <em>dog</em>, predicted <em>cat</em>" in listed.text
    assert "<strong title=\"/elsewhere/data/b.png\">b.png</strong>: 2 pixels" in listed.text
    assert "the report's picture" in listed.text
    png = client.get(f"/runs/{run_id}/evaluate/epoch_1/cell/1/0/0.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"  # b.png's worst picture from the report
    diagonal = client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=0").text
    assert diagonal.index(">b.png</strong>: 3 pixels") < diagonal.index(">d.png</strong>: 2 pixels")  # most first
    assert "the image, nothing drawn" in diagonal
    raw = client.get(f"/runs/{run_id}/evaluate/epoch_1/cell/0/0/1.png")
    assert raw.status_code == 200 and cv2.imdecode(np.frombuffer(raw.content, np.uint8), 1).shape == (30, 20, 3)
    cv2.imwrite(str(run / "eval" / "epoch_1" / "show" / "d.png"), np.zeros((8, 8, 3), np.uint8))
    shown = client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=0").text
    assert "the --show-dir picture" in shown  # a picture of the image in the evaluation folder wins
    assert cv2.imdecode(np.frombuffer(client.get(f"/runs/{run_id}/evaluate/epoch_1/cell/0/0/1.png").content,
                                      np.uint8), 1).shape == (8, 8, 3)
    empty = client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=1").text
    assert "d.png</strong>: 1 pixel<br>" in empty and "No image falls" not in empty
    assert "1 pixel in 1 image." in empty
    write_cells(run / "eval" / "epoch_1" / CELLS_FILE, ["cat", "dog"], "pixels",
                [("/outside/c.png", [(1, 1, 5)]), (str(inside), [(1, 1, 1)])])
    assert '<td>0</td>' in client.get(f"/runs/{run_id}/evaluate").text  # a zero cell has no link
    outside = client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=1&j=1").text
    assert "outside the workspace and the registered data roots (not shown)" in outside
    assert "/cell/1/1/0.png" not in outside and "/cell/1/1/1.png" in outside
    (run / "eval" / "epoch_1" / "show" / "d.png").unlink()
    inside.rename(inside.with_name("moved.png"))
    assert "no such file now" in client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=1&j=1").text
    assert "cannot be read as an image" in client.get(f"/runs/{run_id}/evaluate/epoch_1/cell/1/1/1.png",
                                                      headers={"Accept": "application/json"}).json()["error"]
    assert "No image falls in this cell" in client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=1").text


def test_cell_refusals(eval_client):
    client, run_id, run = eval_client
    json_headers = {"Accept": "application/json"}

    def refused(url: str, status: int = 404) -> str:
        response = client.get(url, headers=json_headers)
        assert response.status_code == status, (url, response.text)
        return response.json()["error"]

    assert "no confusion_cells.json" in refused(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=0")
    _plant_cells(run)
    for i, j in (("2", "0"), ("-1", "0"), ("x", "0"), ("0", ""), ("0", "1.5")):
        message = refused(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i={i}&j={j}")
        name, value = ("i", i) if i not in ("0",) else ("j", j)
        assert message == (f"{name}={value!r}: the confusion matrix has 2 rows and columns; {name} must be a number "
                           "from 0 to 1"), message
    assert "no evaluation of checkpoint 'epoch_9'" in refused(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_9&i=0&j=0")
    assert "which evaluation?" in refused(f"/runs/{run_id}/evaluate/cell?i=0&j=0")
    assert "image 5 is not listed" in refused(f"/runs/{run_id}/evaluate/epoch_1/cell/0/0/5.png")
    write_cells(run / "eval" / "epoch_1" / CELLS_FILE, ["cat", "dog"], "pixels", [("/outside/c.png", [(1, 1, 5)])])
    assert "outside the workspace" in refused(f"/runs/{run_id}/evaluate/epoch_1/cell/1/1/0.png", 403)
    cells_file, report = run / "eval" / "epoch_1" / CELLS_FILE, run / "eval" / "epoch_1" / "report.html"
    os.utime(cells_file, ns=(report.stat().st_mtime_ns - 10**9,) * 2)  # left by an earlier evaluation
    assert "older than report.html" in refused(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=1&j=1")
    (run / "eval" / "epoch_1" / CELLS_FILE).write_text("{broken")
    assert "not JSON" in refused(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i=0&j=0")
    page = client.get(f"/runs/{run_id}/evaluate").text
    assert "not JSON" in page and "cells are not clickable" in page and "/evaluate/cell?" not in page


def test_running_and_failed_states(eval_client):
    client, run_id, run = eval_client
    folder = run / "eval" / "best_acc_epoch_1"
    folder.mkdir()
    write_status(folder, state="running", pid=os.getpid(), started=0, message="")
    status = client.get(f"/runs/{run_id}/evaluate/best_acc_epoch_1/status")
    assert 'hx-trigger="every 2s"' in status.text and "running" in status.text
    write_status(folder, state="failed", pid=os.getpid(), started=0,
                 message="test_dataloader.dataset.data_root: 'gone' does not exist\nmore detail")
    failed = client.get(f"/runs/{run_id}/evaluate?ckpt=best_acc_epoch_1").text
    first_line = "test_dataloader.dataset.data_root: &#39;gone&#39; does not exist"
    assert f'<p class="error" role="alert">{first_line}</p>' in failed
    assert "Traceback" not in failed
    htmx = client.get(f"/runs/{run_id}/evaluate/best_acc_epoch_1/status", headers={"HX-Request": "true"})
    assert htmx.headers.get("HX-Refresh") == "true"  # the job ended: the page reloads with its results
    # a job whose process is gone without writing its end is failed, not running forever
    write_status(folder, state="running", pid=2**22 + 12345, started=0, message="")
    assert "the job stopped without a result" in client.get(f"/runs/{run_id}/evaluate?ckpt=best_acc_epoch_1").text


def test_refusals(eval_client, tmp_path):
    client, run_id, run = eval_client
    json_headers = {"Accept": "application/json"}
    assert client.get("/runs/nope/evaluate", headers=json_headers).status_code == 404
    unknown = client.get(f"/runs/{run_id}/evaluate?ckpt=epoch_9", headers=json_headers)
    assert unknown.status_code == 404 and "no evaluation of checkpoint 'epoch_9'" in unknown.json()["error"]
    for name in ("../../etc/passwd", "/etc/passwd", "epoch_9"):
        refused = client.post(f"/runs/{run_id}/evaluate", data={"checkpoint": name},
                              headers={**csrf_headers(client), **json_headers})
        assert refused.status_code == 404 and "not in" in refused.json()["error"], name
    assert not (run / "eval" / "epoch_9").exists()
    for path in ("../x/report.html", "epoch_1/../../config.yaml"):
        assert client.get(f"/runs/{run_id}/evaluate/{path}").status_code == 404
    assert client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/7.png").status_code == 404
    no_csrf = client.post(f"/runs/{run_id}/evaluate", data={"checkpoint": "epoch_1"})
    assert no_csrf.status_code == 403
    bare = tmp_path / "bare_run"
    bare.mkdir()
    bare_id = client.app.state.workspace.register_run(bare)
    no_config = client.get(f"/runs/{bare_id}/evaluate", headers=json_headers)
    assert no_config.status_code == 400 and "has no config.yaml" in no_config.json()["error"]
    (bare / "config.yaml").write_text("default_scope: x\n")
    no_ckpt = client.post(f"/runs/{bare_id}/evaluate", data={}, headers={**csrf_headers(client), **json_headers})
    assert no_ckpt.status_code == 400 and "no checkpoint (*.pth)" in no_ckpt.json()["error"]


@pytest.mark.slow
def test_evaluate_a_trained_run(client, demo_data, tmp_path_factory):
    run = tiny_trained_run(tmp_path_factory.getbasetemp(), demo_data)
    run_id = client.app.state.workspace.register_run(run)
    started = client.post(f"/runs/{run_id}/evaluate", data={"checkpoint": "epoch_1"}, headers=csrf_headers(client))
    assert started.status_code == 303 and started.headers["location"] == f"/runs/{run_id}/evaluate?ckpt=epoch_1"
    assert wait_for(run / "eval" / "epoch_1", timeout=300)["state"] == "finished"
    text = client.get(started.headers["location"]).text
    assert "mIoU" in text and "IoUMetric per class" in text and "Worst images (up to 8)" in text
    assert client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/0.png").status_code == 200
    # which images fall in each cell: the evaluation's confusion_cells.json adds up to the report's matrix
    cells = read_cells(run / "eval" / "epoch_1" / CELLS_FILE)
    table = confusion(read_report(run / "eval" / "epoch_1" / "report.html")).tables[0]
    assert cells.matrix().tolist() == [[int(v) for v in row[1:]] for row in table["rows"]]
    i, j = max(cells.totals, key=lambda key: (key[0] != key[1], cells.totals[key][0]))  # the largest confusion
    assert f"/evaluate/cell?ckpt=epoch_1&amp;i={i}&amp;j={j}" in text
    listed = client.get(f"/runs/{run_id}/evaluate/cell?ckpt=epoch_1&i={i}&j={j}").text
    assert all(f'<figure data-count="{c}">' in listed for _, c in cells.images(i, j))
    # a checkpoint that is no checkpoint: the pipeline's one-line message, no traceback
    (run / "broken.pth").write_bytes(b"not a checkpoint")
    client.post(f"/runs/{run_id}/evaluate", data={"checkpoint": "broken"}, headers=csrf_headers(client))
    status = wait_for(run / "eval" / "broken", timeout=300)
    assert status["state"] == "failed" and "broken.pth" in status["message"], status
    page = client.get(f"/runs/{run_id}/evaluate?ckpt=broken").text
    assert "broken.pth" in page and "Traceback" not in page
