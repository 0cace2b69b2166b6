"""The Runs room through its routes: the table and its JSON, registering a terminal run, removing (the folder
kept unless its name is typed), compare, a run's page, curves, live events, report, and each refusal."""

from __future__ import annotations

import os
import time

import pytest

from oars.studio import jobs
from tests.studio.conftest import csrf_headers
from tests.studio.runs_helpers import fake_run


@pytest.fixture
def ws_client(make_client, tmp_path):
    """A client whose workspace holds a finished run ``done`` and a stopped one ``half`` under runs/."""
    client = make_client(data_roots=(tmp_path / "terminal",))
    runs = client.app.state.workspace.runs_dir
    fake_run(runs / "done", iters_done=20, lr=0.01, age_s=600)
    fake_run(runs / "half", iters_done=14, lr=0.02, val=(0.5,), age_s=600)
    client.get("/runs")  # the table's scan indexes them
    return client


def test_table_and_api(ws_client):
    page = ws_client.get("/runs")
    assert page.status_code == 200 and 'href="/runs/done"' in page.text and 'href="/runs/half"' in page.text
    rows = {r["id"]: r for r in ws_client.get("/api/runs").json()["runs"]}
    done, half = rows["done"], rows["half"]
    assert (done["status"], done["task"], done["best"], done["epochs_done"], done["max_epochs"]) == \
        ("finished", "segmentation", "mIoU 0.6", 2, 2)
    assert done["config"].endswith("unet_demo_shapes.yaml") and done["progress"] == "iteration 20/20 (100 %)"
    assert half["status"] == "stopped" and half["done"] == 14 and half["total"] == 20 and half["epochs_done"] == 1


def test_terminal_run_counts_as_running_while_its_log_grows(ws_client):
    fake_run(ws_client.app.state.workspace.runs_dir / "fresh", iters_done=5)
    row = next(r for r in ws_client.get("/api/runs").json()["runs"] if r["id"] == "fresh")
    assert row["status"] == "running" and row["eta"] == "0:00:15"


def test_register_a_terminal_work_dir(ws_client, tmp_path):
    headers = csrf_headers(ws_client)
    terminal = tmp_path / "terminal"
    fake_run(terminal / "mine", age_s=600)
    (terminal / "no_config").mkdir()
    ok = ws_client.post("/runs/register", data={"work_dir": str(terminal / "mine")}, headers=headers)
    assert ok.status_code == 303 and ok.headers["location"] == "/runs/mine"
    assert ws_client.get("/runs/mine").status_code == 200
    missing = ws_client.post("/runs/register", data={"work_dir": str(terminal / "no_config")}, headers=headers)
    assert missing.status_code == 400 and "no config.yaml in" in missing.text
    outside = tmp_path / "elsewhere"
    fake_run(outside)
    refused = ws_client.post("/runs/register", data={"work_dir": str(outside)}, headers=headers)
    assert refused.status_code == 403 and "outside the workspace" in refused.text
    escape = ws_client.post("/runs/register", data={"work_dir": "../elsewhere"}, headers=headers)
    assert escape.status_code == 403
    absent = ws_client.post("/runs/register", data={"work_dir": "runs/nope"}, headers=headers)
    assert absent.status_code == 400 and "no such folder" in absent.text


def test_remove_keeps_the_folder_unless_its_name_is_typed(ws_client):
    headers = csrf_headers(ws_client)
    folder = ws_client.app.state.workspace.runs_dir / "done"
    wrong = ws_client.post("/runs/done/remove", data={"delete_folder": "don"},
                           headers={**headers, "Accept": "application/json"})
    assert wrong.status_code == 400 and "type its name exactly ('done'), got 'don'" in wrong.json()["error"]
    assert folder.is_dir() and "done" in ws_client.app.state.workspace.run_ids()
    kept = ws_client.post("/runs/done/remove", data={}, headers=headers)
    assert kept.status_code == 303 and folder.is_dir()
    assert "done" not in [r["id"] for r in ws_client.get("/api/runs").json()["runs"]]  # not found again by the scan
    assert ws_client.post("/runs/register", data={"work_dir": "runs/done"}, headers=headers).status_code == 303
    deleted = ws_client.post("/runs/done/remove", data={"delete_folder": "done"}, headers=headers)
    assert deleted.status_code == 303 and "deleted" in deleted.headers["location"] and not folder.exists()
    assert ws_client.post("/runs/gone/remove", data={}, headers=headers).status_code == 404


def test_compare_overlays_curves_and_diffs_configs(ws_client):
    page = ws_client.get("/runs/compare?ids=done&ids=half")
    url = "/runs/compare/scalars.json?key=loss&amp;ids=done&amp;ids=half"
    assert page.status_code == 200 and f'data-series-url="{url}"' in page.text
    assert '<span class="del">-optim_wrapper: {optimizer: {type: AdamW, lr: 0.01}}</span>' in page.text
    assert '<span class="add">+optim_wrapper: {optimizer: {type: AdamW, lr: 0.02}}</span>' in page.text
    data = ws_client.get("/runs/compare/scalars.json?key=loss&ids=done&ids=half").json()
    assert data["x"] == [float(i) for i in range(1, 21)] and set(data["series"]) == {"done", "half"}
    assert data["series"]["half"][13] == pytest.approx(2 / 14) and data["series"]["half"][14] is None
    assert ws_client.get("/runs/compare?ids=done&ids=half&key=mIoU").status_code == 200
    one = ws_client.get("/runs/compare?ids=done")
    assert one.status_code == 400 and "at least two runs" in one.text
    bad_key = ws_client.get("/runs/compare?ids=done&ids=half&key=nope")
    assert bad_key.status_code == 400 and "not logged by every selected run" in bad_key.text
    assert ws_client.get("/runs/compare?ids=done&ids=nope").status_code == 404


def test_run_page_curves_and_refusals(ws_client):
    page = ws_client.get("/runs/half")
    assert page.status_code == 200
    assert 'data-series-url="/runs/half/scalars.json"' in page.text and "iteration 14/20 (70 %)" in page.text
    assert 'href="/runs/half/evaluate"' in page.text and 'href="/runs/half/export"' in page.text
    assert "sse-connect" not in page.text and 'id="resume"' in page.text  # stopped: no live stream, resumable
    loss = ws_client.get("/runs/half/scalars.json").json()
    assert loss["x_label"] == "iteration" and set(loss["series"]) == {"loss"} and len(loss["x"]) == 14
    assert set(ws_client.get("/runs/half/scalars.json?part=lr").json()["series"]) == {"lr"}
    assert ws_client.get("/runs/half/scalars.json?part=val").json()["series"] == {"aAcc": [0.9], "mIoU": [0.5]}
    bad = ws_client.get("/runs/half/scalars.json?part=nope")
    assert bad.status_code == 400 and "expected one of loss, lr" in bad.text
    unknown = ws_client.get("/runs/nope", headers={"Accept": "application/json"})
    assert unknown.status_code == 404 and "not in this studio's index" in unknown.json()["error"]
    assert "iteration 14/20" in ws_client.get("/runs/half/live").text


def test_events_stream_ends_with_the_run(ws_client):
    with ws_client.stream("GET", "/runs/done/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    assert text.startswith("event: status\ndata: ") and 'id="run-status">finished' in text
    assert text.rstrip().endswith('event: end\ndata: {"status": "finished"}')


def _points(text: str) -> dict:
    import json
    import re

    found = re.search(r'<script type="application/json" id="run-points">(.*?)</script>', text, re.S)
    assert found, text[:500]
    return json.loads(found.group(1))


def test_events_carry_only_the_points_the_page_has_not_drawn(ws_client):
    fake_run(ws_client.app.state.workspace.runs_dir / "fresh", iters_done=5)  # running: its log is fresh
    ws_client.get("/runs")  # the table's scan indexes it
    page = ws_client.get("/runs/fresh")
    assert 'sse-connect="/runs/fresh/events?train=5&amp;val=0"' in page.text  # what the page draws itself
    assert 'id="run-points"' not in page.text
    with ws_client.stream("GET", "/runs/fresh/events?train=3&val=0") as response:
        first = next(response.iter_text())  # the first event; the stream goes on while the run is live
    points = _points(first)
    assert points["loss"]["x"] == [4.0, 5.0] and points["loss"]["series"] == {"loss": [0.5, 0.4]}
    assert set(points["lr"]["series"]) == {"lr"} and points["val"]["x"] == []
    with ws_client.stream("GET", "/runs/done/events?train=20&val=2") as response:  # all drawn: nothing to add
        nothing = _points("".join(response.iter_text()))
    assert nothing["loss"]["x"] == [] and nothing["val"]["x"] == []
    with ws_client.stream("GET", "/runs/done/events?train=99&val=0") as response:  # more than logged: from 0
        again = _points("".join(response.iter_text()))
    assert len(again["loss"]["x"]) == 20 and again["val"]["series"]["mIoU"] == [0.4, 0.6]


def test_stop_and_resume_refusals(ws_client):
    headers = csrf_headers(ws_client)
    stop = ws_client.post("/runs/done/stop", headers=headers)
    assert stop.status_code == 400 and "not running (it is finished)" in stop.text
    resume = ws_client.post("/runs/done/resume", headers=headers)
    assert resume.status_code == 400 and "it is finished; only a stopped or failed run can be resumed" in resume.text
    fake_run(ws_client.app.state.workspace.runs_dir / "early", iters_done=3, checkpoint=False, age_s=600)
    ws_client.get("/runs")
    none = ws_client.post("/runs/early/resume", headers=headers)
    assert none.status_code == 400 and "no checkpoint" in none.text
    fresh = ws_client.app.state.workspace.runs_dir / "fresh"
    fake_run(fresh, iters_done=5)
    ws_client.get("/runs")
    terminal = ws_client.post("/runs/fresh/stop", headers=headers)
    assert terminal.status_code == 400 and "started outside the studio" in terminal.text
    assert ws_client.post("/runs/done/stop").status_code == 403  # no CSRF token


def test_resume_queues_a_stopped_terminal_run(ws_client, monkeypatch):
    started = []
    monkeypatch.setattr(jobs, "_start", lambda ws, row: started.append(row))
    response = ws_client.post("/runs/half/resume", headers=csrf_headers(ws_client))
    assert response.status_code == 303 and len(started) == 1
    cmd = __import__("json").loads(started[0]["cmd"])
    assert cmd[1:3] == ["-m", "oars.studio.train_job"] and "--resume" in cmd
    assert cmd[cmd.index("--config") + 1].endswith("half/config.yaml")


def test_report_is_served_from_the_run_dir(ws_client):
    assert ws_client.get("/runs/done/report.html").status_code == 404
    (ws_client.app.state.workspace.runs_dir / "done" / "report.html").write_text("<h1>report</h1>")
    served = ws_client.get("/runs/done/report.html")
    assert served.text == "<h1>report</h1>" and "default-src 'none'" in served.headers["content-security-policy"]
    assert 'href="/runs/done/report.html"' in ws_client.get("/runs/done").text


def test_a_reused_pid_is_not_taken_for_the_job(ws_client):
    # after a restart the recorded pid may belong to another process by now: its command line tells
    ws = ws_client.app.state.workspace
    jobs.ensure_tables(ws)
    work = ws.runs_dir / "half"
    with ws.connect() as db:
        db.execute("INSERT INTO train_jobs (run_id, state, pid, cmd, queued, started, work_dir, log_file) VALUES "
                   "('half', 'running', ?, '[]', ?, ?, ?, ?)", (os.getpid(), time.time(), time.time(), str(work),
                                                                str(work / "studio_job.log")))
    assert jobs.run_status(ws, "half").state == "failed"


def test_failed_job_record_shows_its_message(ws_client):
    ws = ws_client.app.state.workspace
    jobs.ensure_tables(ws)
    work = ws.runs_dir / "half"
    with ws.connect() as db:
        db.execute("INSERT INTO train_jobs (run_id, state, pid, cmd, queued, started, work_dir, log_file) VALUES "
                   "('half', 'running', 999999999, '[]', ?, ?, ?, ?)", (time.time(), time.time(), str(work),
                                                                        str(work / "studio_job.log")))
    row = next(r for r in ws_client.get("/api/runs").json()["runs"] if r["id"] == "half")
    assert row["status"] == "failed" and "ended without writing its result" in row["message"]
    (work / "studio_job.json").write_text('{"exit_code": 2, "message": "x.yaml: trian_cfg: unknown key", "ended": 1}')
    row = next(r for r in ws_client.get("/api/runs").json()["runs"] if r["id"] == "half")
    assert (row["status"], row["message"]) == ("failed", "x.yaml: trian_cfg: unknown key")
    (work / "studio_job.json").write_text('{"exit_code": 130, "message": "interrupted", "ended": 1}')
    assert jobs.run_status(ws, "half").state == "stopped"
