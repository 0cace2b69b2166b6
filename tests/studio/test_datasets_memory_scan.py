"""A ``memory://`` data set in the real studio: its store lives only in the studio's process, which a background scan
process cannot see, so the studio scans it in the request (``oars.studio.datasets.IN_PROCESS_SCHEMES``); every other
data set still goes to the background job. A scan that fails in the request is a failed status with its one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from oars.studio import background
from oars.studio import datasets as studio_datasets
from oars.studio.security import StudioError
from tests.studio.conftest import csrf_headers

DEMO_CONFIG = "segmentation/unet/unet_demo_shapes"


def _register(client, data: str):
    return client.post("/datasets", data={"config": DEMO_CONFIG, "split": "train", "data": data},
                       headers=csrf_headers(client))


@pytest.fixture
def jobs(monkeypatch, memory_store):
    """The background jobs the studio starts (recorded, not run), on a fresh storage registry (``memory_store``)."""
    started = []
    monkeypatch.setattr(background, "start_job", lambda folder, args, python=None: started.append(args) or
                        {"state": "running"})
    studio_datasets.url_holds_shard_index.cache_clear()
    studio_datasets.entry_storage_options.cache_clear()
    yield started
    studio_datasets.url_holds_shard_index.cache_clear()
    studio_datasets.entry_storage_options.cache_clear()


def test_a_memory_set_is_scanned_in_the_studio_process(make_client, demo_data, memory_store, jobs):
    url = memory_store(demo_data, "shapes")
    client = make_client(data_roots=(Path(demo_data).parent,))
    response = _register(client, url)
    assert response.status_code == 303 and response.headers["location"] == "/datasets/shapes-train"
    assert jobs == []  # no background process: it would see an empty memory store
    index = studio_datasets.DatasetIndex(client.app.state.workspace)
    entry = index.get("shapes-train")
    status = index.scan_status(entry)
    assert status["state"] == "finished" and status["in_process"] and status["result"] == {"samples": 16,
                                                                                            "problems": 0}
    assert len(index.read_scan(entry)["samples"]) == 16
    assert "16 sample(s) read, 0 bad" in client.get("/datasets/shapes-train").text
    assert client.get("/datasets/shapes-train/samples/2.png").content[:4] == b"\x89PNG"
    rescan = client.post("/datasets/shapes-train/scan", headers=csrf_headers(client))
    assert rescan.status_code == 303 and jobs == []
    local = _register(client, demo_data)  # a folder: the background job, as before
    assert local.status_code == 303 and len(jobs) == 1 and jobs[0][:2] == ["scan-dataset", "--config"]


def test_a_memory_set_that_cannot_be_read_names_it_in_one_line(make_client, tmp_path, memory_store, jobs,
                                                               monkeypatch):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.txt").write_text("not a data set")
    url = memory_store(str(tmp_path / "junk"), "junk")
    client = make_client()
    assert _register(client, url).status_code == 303 and jobs == []
    index = studio_datasets.DatasetIndex(client.app.state.workspace)
    entry = index.get("junk-train")
    problems = index.read_scan(entry)["problems"]
    assert len(problems) == 1 and f"image folder not found: {url}/images/train" in problems[0]["reason"]
    assert "\n" not in problems[0]["reason"] and index.scan_status(entry)["state"] == "finished"

    def fails(*args, **kwargs):
        raise StudioError(f"data {url}: the store went away")

    monkeypatch.setattr(studio_datasets, "scan_into", fails)  # a scan that raises: a failed status, as a job's
    assert client.post("/datasets/junk-train/scan", headers=csrf_headers(client)).status_code == 303
    status = index.scan_status(entry)
    assert status["state"] == "failed" and status["message"] == f"data {url}: the store went away"
    assert f"data {url}: the store went away" in client.get("/datasets/junk-train/status").text
