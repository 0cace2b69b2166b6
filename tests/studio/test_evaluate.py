"""The Evaluate room through its routes: an evaluation's metrics, per-class table, worst images, confusion matrix and
embedded report read back from the files an evaluation writes; its running / failed states; each refusal; and (slow)
a real evaluation of a tiny trained run, started from the page, plus one that fails with the pipeline's message."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from oars.studio.background import wait_for, write_status
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
    assert f'src="/runs/{run_id}/evaluate/epoch_1/report.html"' in text
    options = text[text.index('<select name="checkpoint">'):]
    assert options.index("best_acc_epoch_1") < options.index(">epoch_1<")  # best first
    worst = client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/0.png")
    assert worst.status_code == 200 and worst.content[:4] == b"\x89PNG"
    assert "b.png: mIoU 0.100" in client.get(f"/runs/{run_id}/evaluate/epoch_1/worst/0").text
    assert client.get(f"/runs/{run_id}/evaluate/epoch_1/confusion.png").status_code == 200
    report = client.get(f"/runs/{run_id}/evaluate/epoch_1/report.html")
    assert report.status_code == 200 and "default-src 'none'" in report.headers["content-security-policy"]


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
    # a checkpoint that is no checkpoint: the pipeline's one-line message, no traceback
    (run / "broken.pth").write_bytes(b"not a checkpoint")
    client.post(f"/runs/{run_id}/evaluate", data={"checkpoint": "broken"}, headers=csrf_headers(client))
    status = wait_for(run / "eval" / "broken", timeout=300)
    assert status["state"] == "failed" and "broken.pth" in status["message"], status
    page = client.get(f"/runs/{run_id}/evaluate?ckpt=broken").text
    assert "broken.pth" in page and "Traceback" not in page
