"""The Train room through its routes: the catalogue, a config's launch form and size, the live config check
(did-you-mean), the launch refusals, and real jobs: a 1-epoch tiny U-Net to the end; stop, studio restart,
resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from oars.studio import jobs
from oars.studio.app import create_app
from oars.studio.settings import StudioSettings
from tests.studio.conftest import csrf_headers
from tests.studio.runs_helpers import DEMO_NAME, tiny_overrides, wait_status

JSON = {"Accept": "application/json"}


def test_catalogue_groups_configs_by_task_and_model(client):
    page = client.get("/train")
    assert page.status_code == 200
    assert "<summary>segmentation" in page.text and "<strong>unet</strong>" in page.text
    assert f'href="/train?config={DEMO_NAME}"' in page.text


def test_a_config_s_form_and_size(client):
    page = client.get(f"/train?config={DEMO_NAME}")
    assert page.status_code == 200 and 'name="length" id="length" type="number" min="1" value="32"' in page.text
    assert 'hx-get="/train/size?config=' in page.text and "default_scope: segmentation" in page.text
    size = client.get(f"/train/size?config={DEMO_NAME}")
    assert size.status_code == 200 and "parameters" in size.text and "FLOPs" in size.text
    assert "parameters" in client.get(f"/train/size?config={DEMO_NAME}").text  # now from the index
    assert "params ·" in client.get("/train").text  # the catalogue shows measured sizes


def test_unknown_config_and_paths_outside_are_refused(client):
    unknown = client.get("/train?config=unet_demo_shapez", headers=JSON)
    assert unknown.status_code == 400 and "Did you mean: segmentation/unet/unet_demo_shapes" in unknown.json()["error"]
    outside = client.get("/train?config=../../etc/x.yaml", headers=JSON)
    assert outside.status_code == 403 and "outside the workspace" in outside.json()["error"]
    missing = client.get("/train?config=runs/none.yaml", headers=JSON)
    assert missing.status_code == 400 and "no such file" in missing.json()["error"]


def test_check_names_yaml_typos_with_did_you_mean(client):
    headers = csrf_headers(client)
    text = client.get(f"/train?config={DEMO_NAME}").text
    original = Path(__file__).resolve().parents[2] / "configs" / f"{DEMO_NAME}.yaml"
    ok = client.post("/train/check", data={"config": DEMO_NAME, "yaml": original.read_text()}, headers=headers)
    assert ok.status_code == 200 and "Config OK" in ok.text and "sse" not in ok.text
    typo = original.read_text().replace("train_cfg: {max_epochs: 32}", "trian_cfg: {max_epochs: 1}")
    bad = client.post("/train/check", data={"config": DEMO_NAME, "yaml": typo}, headers=headers)
    assert "unet_demo_shapes.yaml (edited): trian_cfg: unknown top-level key. Did you mean: train_cfg?" in bad.text
    assert "/tmp" not in bad.text and 'class="error"' in bad.text and "unet_demo_shapes" in text
    broken = client.post("/train/check", data={"config": DEMO_NAME, "yaml": "model: [1,\n"}, headers=headers)
    assert "not valid YAML at line" in broken.text
    override = client.post("/train/check", data={"config": DEMO_NAME, "extra": "model.backbone.base_chanels=4"},
                           headers=headers)
    assert "base_chanels" in override.text and "Did you mean: base_channels" in override.text
    lr = client.post("/train/check", data={"config": DEMO_NAME, "lr": "fast"}, headers=headers)
    assert "lr 'fast': expected a number" in lr.text
    line = client.post("/train/check", data={"config": DEMO_NAME, "extra": "num_workers 0"}, headers=headers)
    assert "line 1: 'num_workers 0': expected key=value" in line.text


def test_launch_refuses_a_config_with_problems(client):
    headers = {**csrf_headers(client), **JSON}
    runs = client.app.state.workspace.runs_dir
    bad = client.post("/train/launch", data={"config": DEMO_NAME, "extra": "trian_cfg.max_epochs=1"}, headers=headers)
    assert bad.status_code == 400 and "not launched" in bad.json()["error"] and "Did you mean" in bad.json()["error"]
    zero = client.post("/train/launch", data={"config": DEMO_NAME, "length": "0"}, headers=headers)
    assert zero.status_code == 400 and "length 0: expected a value above 0" in zero.json()["error"]
    assert not list(runs.iterdir())  # nothing made, nothing queued
    assert client.post("/train/launch", data={"config": DEMO_NAME}).status_code == 403  # no CSRF token


def test_queue_holds_a_second_launch_until_the_slot_frees(client, monkeypatch):
    started = []

    def fake_start(ws, row):  # what _start records, without a process
        started.append(row["run_id"])
        with ws.connect() as db:
            db.execute("UPDATE train_jobs SET state = 'running', pid = 1 WHERE run_id = ?", (row["run_id"],))

    monkeypatch.setattr(jobs, "_start", fake_start)
    monkeypatch.setattr(jobs, "_job_alive", lambda row: True)
    headers = csrf_headers(client)
    first = client.post("/train/launch", data={"config": DEMO_NAME, "length": "1"}, headers=headers)
    second = client.post("/train/launch", data={"config": DEMO_NAME, "length": "2"}, headers=headers)
    assert first.status_code == second.status_code == 303
    ws = client.app.state.workspace
    ids = [loc.headers["location"].rsplit("/", 1)[-1] for loc in (first, second)]
    assert started == [ids[0]] and jobs.run_status(ws, ids[1]).state == "queued"
    cmd = json.loads(jobs.job_record(ws, ids[1])["cmd"])
    assert cmd[1:3] == ["-m", "oars.studio.train_job"] and cmd[-1] == "train_cfg.max_epochs=2"
    busy = client.post(f"/runs/{ids[1]}/remove", headers={**headers, **JSON})
    assert busy.status_code == 400 and "stop it before removing it" in busy.json()["error"]
    stopped = client.post(f"/runs/{ids[1]}/stop", headers=headers)  # a queued run leaves the queue
    assert stopped.status_code == 303 and jobs.run_status(ws, ids[1]).state == "stopped"


def _launch(client, data_root: str, epochs: int, extra: str = "") -> str:
    response = client.post("/train/launch", headers=csrf_headers(client), data={
        "config": DEMO_NAME, "length": str(epochs), "extra": tiny_overrides(data_root) + extra})
    assert response.status_code == 303, response.text
    return response.headers["location"].rsplit("/", 1)[-1]


@pytest.mark.slow
def test_a_real_job_trains_to_the_end(client, demo_data):
    run_id = _launch(client, demo_data, 1)
    row = wait_status(client, run_id, ("finished", "failed"))
    assert row["status"] == "finished", row
    assert row["epochs_done"] == 1 and row["best"].startswith("mIoU") and row["task"] == "segmentation"
    curves = client.get(f"/runs/{run_id}/scalars.json").json()
    assert curves["x"] and curves["series"]["loss"]
    work = client.app.state.workspace.run_dir(run_id)
    assert json.loads((work / "studio_job.json").read_text())["exit_code"] == 0


@pytest.mark.slow
def test_a_failing_job_shows_the_tool_s_one_line_message(client, tmp_path):
    run_id = _launch(client, str(tmp_path / "no_such_data"), 1)
    row = wait_status(client, run_id, ("finished", "failed"))
    assert row["status"] == "failed" and "no_such_data" in row["message"], row
    assert "Traceback" not in row["message"] and "\n" not in row["message"].strip()


@pytest.mark.slow
def test_stop_restart_and_resume(client, demo_data, tmp_path):
    # 16 tiny epochs of 4 iterations, a checkpoint each: stop after the first, find it again from a new studio
    run_id = _launch(client, demo_data, 16, "\ntrain_cfg.val_interval=8")
    ws = client.app.state.workspace
    work = ws.run_dir(run_id)
    wait_status(client, run_id, ("running",))
    for _ in range(600):
        if (work / "last_checkpoint").exists() or jobs.run_status(ws, run_id).state != "running":
            break
        __import__("time").sleep(0.2)
    assert (work / "last_checkpoint").exists()
    restarted = create_app(StudioSettings(workspace=client.app.state.settings.workspace))
    status = jobs.run_status(restarted.state.workspace, run_id)
    assert status.state == "running" and status.pid == jobs.job_record(ws, run_id)["pid"]
    os.kill(status.pid, 0)
    jobs.stop(restarted.state.workspace, restarted.state.settings, run_id)  # the new studio stops it
    row = wait_status(client, run_id, ("stopped", "failed", "finished"))
    assert row["status"] == "stopped", row
    assert "resume" in row["message"]  # the pipeline's Ctrl-C note naming the checkpoint to continue from
    resumed = client.post(f"/runs/{run_id}/resume", headers=csrf_headers(client))
    assert resumed.status_code == 303
    row = wait_status(client, run_id, ("finished", "failed"), timeout=400)
    assert row["status"] == "finished" and row["epochs_done"] == 16, row
    again = client.post(f"/runs/{run_id}/resume", headers={**csrf_headers(client), **JSON})
    assert again.status_code == 400 and "it is finished" in again.json()["error"]
