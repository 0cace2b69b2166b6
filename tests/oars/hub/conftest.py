"""A local HTTP server on 127.0.0.1 that serves torchvision-layout files made in this process (random weights),
and an environment whose hub cache and registry live in a temporary folder: nothing is ever fetched from the
network, and nothing is written to the user's caches.

The server serves ``/models/<file>`` whole and ``/short/<file>`` announcing the whole length but closing the
connection after half of the bytes (an interrupted download).
"""

from __future__ import annotations

import http.server
import io
import os
import threading
from collections.abc import Iterator

import pytest
import torch


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        _, kind, name = (self.path.split("/", 2) + ["", ""])[:3]
        data = self.files.get(name)
        if data is None or kind not in ("models", "short"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data if kind == "models" else data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args) -> None:  # keep the test output clean
        return None


@pytest.fixture(scope="module")
def hub_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """(base URL ``http://127.0.0.1:<port>``, the served files by name: add to it to serve more)."""
    files: dict[str, bytes] = {}
    handler = type("Handler", (_Handler,), {"files": files})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", files
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def mobilenet_file() -> tuple[bytes, dict[str, torch.Tensor]]:
    """torchvision ``mobilenet_v3_small`` (weights=None: random, 2.5 M parameters, ~10 MB) saved as torchvision
    publishes it (a bare state dict): (the file's bytes, the state dict)."""
    import torchvision

    torch.manual_seed(0)
    state = torchvision.models.mobilenet_v3_small(weights=None).state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue(), state


@pytest.fixture
def hub_env(tmp_path, monkeypatch) -> str:
    """TORCH_HOME and OARS_HOME in ``tmp_path``, no mirror, not offline; returns the hub cache folder."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("OARS_HOME", str(tmp_path / "oars"))
    monkeypatch.delenv("OARS_HUB_URL", raising=False)
    monkeypatch.delenv("OARS_HUB_OFFLINE", raising=False)
    from oars.hub import cache_dir

    assert cache_dir() == os.path.join(str(tmp_path), "torch", "hub", "checkpoints")
    return cache_dir()
