"""The Datasets room on URLs and shards: a data set registered on a ``memory://`` URL, a local shards folder, or (on
the loopback S3) an ``s3://`` folder and an ``s3://`` shards URL is scanned through the storage layer and shows the
samples, counts and pictures of the local set; a large set is scanned on a seeded sample (``--sample``'s rule); a
truncated shard is one problem naming it; refused schemes, ``file://`` outside the roots, and a URL with nothing
there get one line each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oars.data import storage
from oars.data.check import sample_indices
from oars.studio import datasets as studio_datasets
from oars.studio.background import wait_for
from tests.studio.conftest import REPO, csrf_headers

fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")

DEMO_CONFIG = "segmentation/unet/unet_demo_shapes"
DEMO_FILE = REPO / "configs" / "segmentation" / "unet" / "unet_demo_shapes.yaml"


def _register(client, data: str, split: str = "train", config: str = DEMO_CONFIG):
    return client.post("/datasets", data={"config": config, "split": split, "data": data},
                       headers={**csrf_headers(client), "Accept": "application/json"})


@pytest.fixture
def in_process(monkeypatch, tmp_path):
    """Scans run in the test's process (a ``memory://`` store is not seen by a background process), on a fresh
    storage registry and cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("OARS_STORAGE_OPTIONS", raising=False)
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(storage, "_listings", {})
    studio_datasets.url_holds_shard_index.cache_clear()
    studio_datasets.entry_storage_options.cache_clear()

    def scan_now(self, entry, python=None):
        self.scan(entry)
        return {"state": "finished"}

    monkeypatch.setattr(studio_datasets.DatasetIndex, "start_scan", scan_now)
    monkeypatch.setattr(studio_datasets.DatasetIndex, "scan_status", lambda self, entry: {"state": "finished"})
    yield
    studio_datasets.url_holds_shard_index.cache_clear()
    studio_datasets.entry_storage_options.cache_clear()


@pytest.fixture
def memory_set(demo_data):
    """The demo shapes at ``memory://oars-studio/shapes``."""
    fs = fsspec.filesystem("memory")
    fs.put(demo_data.rstrip("/") + "/", "/oars-studio/shapes/", recursive=True)
    yield "memory://oars-studio/shapes"
    fs.rm("/oars-studio", recursive=True)


def test_a_memory_url_scans_as_the_local_folder(make_client, demo_data, memory_set, in_process):
    client = make_client(data_roots=(Path(demo_data).parent,))
    local = _register(client, demo_data)
    remote = _register(client, memory_set)
    assert remote.status_code == 303 and remote.headers["location"] == "/datasets/shapes-train"
    index = studio_datasets.DatasetIndex(client.app.state.workspace)
    a, b = (index.read_scan(index.get(r.headers["location"].rsplit("/", 1)[1])) for r in (local, remote))
    assert len(b["samples"]) == len(a["samples"]) == 16 and b["problems"] == []
    assert b["counts"] == a["counts"] and sum(b["counts"].values()) > 0 and b["sampled"] is None
    assert b["samples"][3]["files"].startswith(f"{memory_set}/images/train/")
    page = client.get("/datasets/shapes-train").text
    assert f"data <code>{memory_set}</code>" in page and "16 sample(s) read, 0 bad" in page
    picture = client.get("/datasets/shapes-train/samples/3.png")
    assert picture.status_code == 200 and picture.content[:4] == b"\x89PNG"
    assert client.get("/datasets/shapes-train/samples/16.png").status_code == 404


def test_a_large_url_set_is_scanned_on_a_seeded_sample(make_client, memory_set, in_process, monkeypatch):
    monkeypatch.setattr(studio_datasets, "SCAN_SAMPLE", 5)
    client = make_client()
    assert _register(client, memory_set).status_code == 303
    index = studio_datasets.DatasetIndex(client.app.state.workspace)
    scan = index.read_scan(index.get("shapes-train"))
    assert scan["sampled"] == {"read": 5, "total": 16, "seed": 0}
    assert [s["index"] for s in scan["samples"]] == sample_indices(16, 5, 0)
    assert scan["summary"] == ["train (SegDataset): 5 of 16 sample(s) read (a random sample, seed 0), 0 bad"]
    page = client.get("/datasets/shapes-train").text
    assert "A random sample of 5 of 16 samples (seed 0) was read" in page
    assert client.get("/datasets/shapes-train/samples/4.png").status_code == 200
    assert client.get("/datasets/shapes-train/samples/5.png").status_code == 404


def test_a_local_shards_folder_and_a_truncated_shard(make_client, demo_data, tmp_path, in_process):
    from oars.config.check import load_checked_config
    from oars.data.shards.writer import make_shards

    roots = tmp_path / "roots"
    roots.mkdir()
    cfg = load_checked_config(str(DEMO_FILE), [f"val_dataloader.dataset.data_root={demo_data}"])
    make_shards(cfg, "val", str(roots / "val_shards"), 40_000, progress=False)
    client = make_client(data_roots=(roots,))
    assert _register(client, str(roots / "val_shards"), split="val").status_code == 303
    index = studio_datasets.DatasetIndex(client.app.state.workspace)
    scan = index.read_scan(index.get("val_shards-val"))
    assert len(scan["samples"]) == 8 and scan["problems"] == [] and sum(scan["counts"].values()) > 0
    assert scan["summary"] == ["val (ShardDataset): 8 sample(s) read, 0 bad"]
    assert {"shard", "key"} <= set(scan["samples"][7])
    picture = client.get("/datasets/val_shards-val/samples/7.png")
    assert picture.status_code == 200 and picture.content[:4] == b"\x89PNG"
    # a shard cut short: one problem naming it, the other shards still read
    shard = roots / "val_shards" / scan["samples"][0]["shard"]
    shard.write_bytes(shard.read_bytes()[:1000])
    again = client.post("/datasets/val_shards-val/scan", headers=csrf_headers(client))
    assert again.status_code == 303
    scan = index.read_scan(index.get("val_shards-val"))
    assert [p["files"] for p in scan["problems"]] == [str(shard)]
    assert "\n" not in scan["problems"][0]["reason"] and 0 < len(scan["samples"]) < 8


def test_refused_urls_are_one_line_each(make_client, tmp_path, in_process):
    client = make_client()
    for url, needle in (("ftp://host/set", "URL scheme 'ftp' is not accepted"),
                        ("nosuch://bucket/set", "URL scheme 'nosuch' is not accepted"),
                        ("simplecache::memory://oars-studio/x", "URL scheme 'simplecache' is not accepted"),
                        ("memory://oars-studio/set/data.yaml", "a dataset description file must be a local file"),
                        ("memory://oars-studio-none/set", "memory://oars-studio-none/set: nothing there")):
        refused = _register(client, url)
        assert refused.status_code == 400, (url, refused.text)
        assert needle in refused.json()["error"] and "\n" not in refused.json()["error"]
    outside = _register(client, f"file://{tmp_path}")
    assert outside.status_code == 403 and "outside the workspace and the registered data roots" in outside.text
    assert client.get("/datasets").text.count('href="/datasets/') == 0  # nothing was registered


def _s3_config(folder: Path, endpoint: str) -> str:
    """A config in the workspace: the demo U-Net with the loopback endpoint as its splits' storage_options."""
    path = folder / "unet_s3.yaml"
    path.write_text(f"_base_: {DEMO_FILE}\n" + "".join(
        f"{s}_dataloader: {{dataset: {{storage_options: {{endpoint_url: '{endpoint}'}}}}}}\n"
        for s in ("train", "val", "test")))
    return str(path)


@pytest.mark.slow  # two background scans (fresh processes importing torch) against the loopback S3
def test_s3_folder_and_s3_shards_scan_in_the_background(make_client, s3_server, demo_data, tmp_path):
    from oars.config.check import load_checked_config
    from oars.data.shards.writer import make_shards

    studio_datasets.url_holds_shard_index.cache_clear()
    studio_datasets.entry_storage_options.cache_clear()
    client = make_client()
    ws = client.app.state.workspace.root
    ws.mkdir(parents=True, exist_ok=True)
    config = _s3_config(ws, s3_server.endpoint_url)
    cfg = load_checked_config(str(DEMO_FILE), [f"val_dataloader.dataset.data_root={demo_data}"])
    shards = f"s3://{s3_server.bucket}/studio-shards/val"
    make_shards(cfg, "val", shards, 40_000, storage_options=s3_server.storage_options, progress=False)
    folder = f"s3://{s3_server.bucket}/shapes"
    for data, split, dataset_id, n in ((folder, "train", "shapes-train", 16), (shards, "val", "val-val", 8)):
        response = _register(client, data, split=split, config=config)
        assert response.status_code == 303 and response.headers["location"] == f"/datasets/{dataset_id}"
        status = wait_for(ws / "datasets" / dataset_id, timeout=300)
        assert status and status["state"] == "finished" and status["result"] == {"samples": n, "problems": 0}, status
        page = client.get(f"/datasets/{dataset_id}").text
        assert f"data <code>{data}</code>" in page and f"{n} sample(s) read, 0 bad" in page
        assert client.get(f"/datasets/{dataset_id}/samples/{n - 1}.png").content[:4] == b"\x89PNG"
    missing = _register(client, f"s3://{s3_server.bucket}/no-such-set", config=config)
    assert missing.status_code == 400
    assert f"s3://{s3_server.bucket}/no-such-set: nothing there" in missing.json()["error"]
    shutil.rmtree(ws / "datasets", ignore_errors=True)
