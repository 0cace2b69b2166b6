"""Shared fixtures: a small generated demo data set and overrides that shrink the demo config."""

from __future__ import annotations

import os

import pytest

# oars first: before torch loads libgomp it bounds its spin count (GOMP_SPINCOUNT), as in every oars run
import oars  # noqa: F401

# isort: split
import torch

# `make test` runs two pytest-xdist workers with OMP_NUM_THREADS=1 each (2 cores); a plain `pytest` uses 2 threads.
torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or min(2, os.cpu_count() or 1))))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> str:
    """16 training and 8 validation images of the demo shapes set (128 px)."""
    from oars.data.demo_shapes import generate

    out = tmp_path_factory.mktemp("demo_shapes")
    generate(str(out), num_train=16, num_val=8, size=128, seed=0)
    return str(out)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory, demo_data):
    """A loopback S3 endpoint (moto, 127.0.0.1, a free port) for the session, dummy credentials in the environment,
    the demo shapes set uploaded to ``s3://oars-data/shapes`` (tests/s3_server.py)."""
    pytest.importorskip("moto.server", reason="moto[server] (the dev extra) runs the loopback S3")
    pytest.importorskip("s3fs", reason="s3fs (the data extra) reads s3:// URLs")
    from s3_server import running_s3_server

    with running_s3_server(str(tmp_path_factory.mktemp("s3_env"))) as server:
        server.upload(demo_data, "shapes")
        yield server


class MemoryStore:
    """The ``memory://`` store of one test: ``store(local_dir, name)`` copies a folder to ``memory://oars-mem/<name>``
    and returns that URL; ``remove(url)`` deletes an object and ``pipe(url, data)`` plants one (both forget the folder
    listings, as a new process would)."""

    BUCKET = "oars-mem"

    def __init__(self, fs) -> None:
        self.fs = fs

    def __call__(self, local_dir: str, name: str) -> str:
        self.fs.put(local_dir.rstrip("/") + "/", f"/{self.BUCKET}/{name}/", recursive=True)
        return f"memory://{self.BUCKET}/{name}"

    def remove(self, url: str) -> None:
        from oars.data import storage

        self.fs.rm(url.split("://", 1)[1])
        storage._listings.clear()

    def pipe(self, url: str, data: bytes) -> None:
        from oars.data import storage

        self.fs.pipe(url.split("://", 1)[1], data)
        storage._listings.clear()


@pytest.fixture
def memory_store(tmp_path, monkeypatch):
    """A fresh ``memory://`` store (:class:`MemoryStore`) and storage registry for one test (the URL tests of every
    format read their local set back from it); the cache folder under ``tmp_path``; emptied afterwards."""
    fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")
    from oars.data import storage

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("OARS_STORAGE_OPTIONS", raising=False)
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(storage, "_listings", {})
    fs = fsspec.filesystem("memory")
    yield MemoryStore(fs)
    if fs.exists(f"/{MemoryStore.BUCKET}"):
        fs.rm(f"/{MemoryStore.BUCKET}", recursive=True)
