"""Shared fixtures of the serving tests: the tiny export (serve_cases.py) and ONE ``oars-serve`` server for the
whole session, started in a subprocess on a free loopback port (its Ray instance is the session's only one; its
startup time is printed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from serve_cases import SERVER_FLAGS, TOKEN, Server, free_port, write_tiny_segmentor
from startup_probe import StartupProbe


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory) -> str:
    """The tiny dynamic-batch segmentor export (session-wide)."""
    return write_tiny_segmentor(str(tmp_path_factory.mktemp("serve_export") / "tiny"))


def launch(tiny_export: str, root, token_file) -> tuple[Server | None, str]:
    """Start ``oars-serve`` on a free port and wait until ready: (server, "") or (None, the log's tail) when it
    exited because the port was taken meanwhile (a race with other programs no free-port pick can exclude)."""
    port = free_port()
    log = str(root / f"server-{port}.log")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_DEDUP_LOGS": "0"}
    cmd = [sys.executable, "-m", "oars_deploy.serve.cli", "--model-dir", tiny_export, "--port", str(port),
           "--token-file", str(token_file), *SERVER_FLAGS]
    probe = StartupProbe(f"http://127.0.0.1:{port}", TOKEN)  # every answer from the first connection on
    probe.start()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        text = open(log).read()
        if proc.poll() is not None:
            probe.stop.set()
            if "cannot listen on" in text:
                return None, text[-3000:]
            pytest.fail(f"oars-serve exited with {proc.returncode}:\n{text[-3000:]}")
        if "ready on" in text:
            probe.join(timeout=30)
            srv = Server(f"http://127.0.0.1:{port}", proc, tiny_export, str(token_file), log)
            srv.startup_answers = probe.answers
            return srv, ""
        time.sleep(0.25)
    probe.stop.set()
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"oars-serve did not become ready:\n{open(log).read()[-3000:]}")


@pytest.fixture(scope="session")
def server(tmp_path_factory, tiny_export) -> Server:
    """ONE ``oars-serve`` for the session (the only Ray instance), on a free loopback port, with a token."""
    pytest.importorskip("ray.serve")
    root = tmp_path_factory.mktemp("serve_server")
    token_file = root / "token"
    token_file.write_text(TOKEN + "\n")
    t0 = time.perf_counter()
    for _ in range(3):
        srv, failure = launch(tiny_export, root, token_file)
        if srv is not None:
            break
    else:
        pytest.fail(f"oars-serve found its port taken three times:\n{failure}")
    proc = srv.proc
    print(f"\noars-serve startup (Ray + Serve + model): {time.perf_counter() - t0:.1f} s")
    yield srv
    os.killpg(proc.pid, signal.SIGINT)  # its own session: the server and the Ray processes it started
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
