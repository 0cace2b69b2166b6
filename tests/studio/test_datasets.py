"""The Datasets room through its routes: register a config's split on a folder (a copy of the demo shapes with one
planted bad label map), see the problem per file, the counts, the histogram and the grid with its filters; and each
refusal (unknown split, config or data set, paths outside the workspace and data roots, a missing CSRF token)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from oars.studio.background import wait_for, write_status
from tests.studio.conftest import csrf_headers

DEMO_CONFIG = "segmentation/unet/unet_demo_shapes"  # as the catalogue (oars.studio.configs) names it
BAD_LABEL = "labels/train/0003.png"


@pytest.fixture(scope="module")
def broken_copy(demo_data, tmp_path_factory) -> Path:
    """The session's demo shapes with one label map replaced by bytes that are no image."""
    copy = tmp_path_factory.mktemp("studio_data") / "shapes_broken"
    shutil.copytree(demo_data, copy)
    (copy / BAD_LABEL).write_bytes(b"not a png")
    return copy


@pytest.fixture
def data_client(make_client, broken_copy):
    return make_client(data_roots=(broken_copy.parent,))


def _register(client, data: str, split: str = "train", config: str = DEMO_CONFIG):
    """POST the registration form as a page does (refusals asked for as JSON: their message unescaped)."""
    return client.post("/datasets", data={"config": config, "split": split, "data": data},
                       headers={**csrf_headers(client), "Accept": "application/json"})


def _scanned(client, dataset_id: str) -> dict:
    """Wait for the data set's background scan to end; returns its final status."""
    status = wait_for(client.app.state.workspace.root / "datasets" / dataset_id, timeout=300)
    assert status and status["state"] == "finished", status
    return status


def test_form_offers_the_catalogue(client):
    form = client.get("/datasets").text
    assert f'<option value="{DEMO_CONFIG}" selected>' in form and "_base_" not in form


def test_register_shows_problem_counts_histogram_and_grid(data_client, broken_copy):
    assert "Register a data set" in data_client.get("/datasets").text
    response = _register(data_client, str(broken_copy))
    assert response.status_code == 303 and response.headers["location"] == "/datasets/shapes_broken-train"
    assert _scanned(data_client, "shapes_broken-train")["result"] == {"samples": 16, "problems": 1}
    page = data_client.get("/datasets/shapes_broken-train")
    assert page.status_code == 200
    text = page.text
    assert "16 sample(s) read, 1 bad" in text
    assert f"{broken_copy}/{BAD_LABEL}" in text and "could not read label map" in text
    for name in ("background", "circle", "square", "triangle"):
        assert f"?cls={name}" in text
    assert text.count('class="sample') == 16
    assert data_client.get("/datasets/shapes_broken-train/histogram.png").headers["content-type"] == "image/png"
    # the filters: the one bad sample; a class every sample holds
    bad = data_client.get("/datasets/shapes_broken-train?problem=1").text
    assert bad.count('class="sample bad"') == 1 and 'data-index="3"' in bad
    circles = data_client.get("/datasets/shapes_broken-train?cls=circle").text
    assert 0 < circles.count('class="sample') < 16
    picture = data_client.get("/datasets/shapes_broken-train/samples/0.png")
    assert picture.status_code == 200 and picture.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert data_client.get("/datasets/shapes_broken-train/samples/3.png").status_code == 200  # a note, not a crash
    listing = data_client.get("/datasets").text
    assert "shapes_broken-train" in listing
    # registering the same thing again keeps one entry; checking again reads the fixed file
    assert _register(data_client, str(broken_copy)).headers["location"] == "/datasets/shapes_broken-train"
    shutil.copy(broken_copy / "labels/train/0002.png", broken_copy / BAD_LABEL)
    again = data_client.post("/datasets/shapes_broken-train/scan", headers=csrf_headers(data_client))
    assert again.status_code == 303
    _scanned(data_client, "shapes_broken-train")
    assert "No problem found" in data_client.get("/datasets/shapes_broken-train").text
    (broken_copy / BAD_LABEL).write_bytes(b"not a png")


def test_refusals(data_client, broken_copy, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = Path(data_client.app.state.workspace.root) / "link_out"
    os.symlink(outside, link)
    for data in ("../../outside", str(outside), "link_out", "link_out/x"):
        refused = _register(data_client, data)
        assert refused.status_code == 403 and "outside the workspace and the registered data roots" in refused.text
    assert "split 'nope': expected one of train, val, test" in _register(data_client, str(broken_copy), "nope").text
    missing = _register(data_client, str(broken_copy / "nothing_here"))
    assert missing.status_code == 400 and "nothing there" in missing.text
    not_yaml = _register(data_client, "", config=str(broken_copy / "meta.json"))
    assert not_yaml.status_code == 400 and "not a shipped config nor a .yaml file" in not_yaml.json()["error"]
    for config in ("/etc/oars.yaml", "../../x.yaml"):
        assert _register(data_client, "", config=config).status_code == 403, config
    assert "pick a config" in _register(data_client, "", config="").json()["error"]
    unknown = data_client.get("/datasets/nope", headers={"Accept": "application/json"})
    assert unknown.status_code == 404 and "not registered" in unknown.json()["error"]
    no_csrf = data_client.post("/datasets", data={"config": DEMO_CONFIG, "split": "train"})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
    _register(data_client, str(broken_copy))
    _scanned(data_client, "shapes_broken-train")
    assert "not a class of this data set" in data_client.get("/datasets/shapes_broken-train?cls=dog").text
    assert data_client.get("/datasets/shapes_broken-train/samples/999.png").status_code == 404


def test_a_config_problem_is_one_message(data_client, broken_copy, tmp_path):
    # a description file whose format the config's task does not read: the description's own message
    description = broken_copy.parent / "bad_data.yaml"
    description.write_text("format: nosuchformat\nroot: shapes_broken\ntrain: images/train\n")
    refused = _register(data_client, str(description))
    assert refused.status_code == 400
    assert "format: 'nosuchformat' is not a format the config's task" in refused.text
    assert "Traceback" not in refused.text


def test_the_page_shows_the_running_scan_and_its_end(data_client, broken_copy):
    """What the page shows while the background scan runs ("checking… n of N", polled by htmx), when it failed
    (its one-line message), and that an htmx poll after its end reloads the page."""
    _register(data_client, str(broken_copy))
    status = _scanned(data_client, "shapes_broken-train")
    folder = data_client.app.state.workspace.root / "datasets" / "shapes_broken-train"
    write_status(folder, **{**status, "state": "running", "pid": os.getpid(), "done": 5, "total": 16})
    page = data_client.get("/datasets/shapes_broken-train").text
    assert "checking… 5 of 16 samples read" in page and 'hx-get="/datasets/shapes_broken-train/status"' in page
    assert 'id="problems"' in page  # the last finished scan stays shown meanwhile
    assert "checking…" in data_client.get("/datasets").text
    poll = data_client.get("/datasets/shapes_broken-train/status", headers={"HX-Request": "true"})
    assert "5 of 16" in poll.text and "HX-Refresh" not in poll.headers
    again = data_client.post("/datasets/shapes_broken-train/scan", headers=csrf_headers(data_client))
    assert again.status_code == 303 and read_pid(folder) == os.getpid()  # a running scan is left to finish
    write_status(folder, **{**status, "state": "failed", "message": "data/x.json: not JSON\ndetails"})
    failed = data_client.get("/datasets/shapes_broken-train").text
    assert '<p class="error" role="alert" id="scan-error">data/x.json: not JSON</p>' in failed
    ended = data_client.get("/datasets/shapes_broken-train/status", headers={"HX-Request": "true"})
    assert ended.headers["HX-Refresh"] == "true"
    write_status(folder, **status)
    finished = data_client.get("/datasets/shapes_broken-train").text
    assert "checking…" not in finished and 'id="scan-error"' not in finished


def read_pid(folder: Path) -> int | None:
    import json

    return json.loads((folder / "status.json").read_text())["pid"]
