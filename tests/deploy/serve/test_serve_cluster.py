"""The two-machine setup of docs/deploy.md in miniature: a Ray head and a worker node started with ``ray start`` on
this machine, the application deployed with ``serve deploy`` from the file ``oars-serve --write-config`` wrote, one
replica on each node (Ray's state API says where), and POST /predict through the head's HTTP proxy answering
``oars-infer``'s record for the same image from both nodes' replicas.

Why the nodes are 127.0.0.2 (head) and 127.0.0.3 (worker): Ray's CLI rewrites ``127.0.0.1`` / ``localhost`` in
``--node-ip-address`` and ``--address`` to the machine's outward address (``resolve_ip_for_localhost``), so a node
started at 127.0.0.1 is announced, and must be joined, on that address; any other loopback address is kept. Two of
them also give the two nodes distinct addresses, as two machines have. The HTTP proxy and the dashboard listen on
127.0.0.1. Token authentication is on with a token file of the test's own (``RAY_AUTH_TOKEN_PATH``), as a real
cluster would share one; ``~/.ray`` is not touched.

Isolation from the session's ``oars-serve`` (conftest.py), even in the same xdist worker: every port given to Ray
is a free one of its own (GCS, dashboard, dashboard agents, Ray client server, HTTP), its own ``--temp-dir`` per
node, and the commands name the addresses explicitly. ``ray stop`` is NOT used: it stops every Ray process on the
machine, the session server's too. Each ``ray start --block`` runs in a session of its own instead; teardown sends
it SIGTERM (it stops the processes it started), then SIGKILLs whatever is left in those sessions or runs from the
test's temp dir, and fails if anything survives.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from serve_cases import TOKEN, Server, free_port, write_images, write_tiny_segmentor

from oars_deploy.cli import run as infer_main
from oars_deploy.records import read_results

pytestmark = pytest.mark.slow

BIN = osp.dirname(sys.executable)  # the `ray` and `serve` console scripts of this environment
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 20.0


def _sessions_and_cmdlines() -> dict[int, tuple[int, str]]:
    """Every live (non-zombie) process: pid -> (session id, command line)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after "(comm)": state ppid pgrp session ...
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z":
            out[int(entry)] = (int(fields[3]), cmdline)
    return out


class RayNodes:
    """The ``ray start --block`` processes of the test (each the leader of its own session) and their ports."""

    def __init__(self, root: str, env: dict) -> None:
        self.root, self.env = root, env
        self.procs: dict[str, subprocess.Popen] = {}
        self.started: dict[str, float] = {}
        self.gcs_port, self.dashboard_port, self.http_port = free_port(), free_port(), free_port()
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"

    def log(self, name: str) -> str:
        """The console output file of node ``name``."""
        return osp.join(self.root, f"{name}.log")

    def start(self, name: str, args: list[str]) -> None:
        """Launch ``ray start --block ARGS --temp-dir ROOT/NAME`` (in a session of its own; :meth:`wait_up`)."""
        cmd = [osp.join(BIN, "ray"), "start", "--block", *args, "--temp-dir", osp.join(self.root, name),
               "--disable-usage-stats"]
        self.started[name] = time.perf_counter()
        with open(self.log(name), "w") as out:
            self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                                start_new_session=True)

    def wait_up(self, name: str) -> float:
        """Wait until node ``name`` runs (its ``ray start`` says it blocks now); the seconds since it was launched."""
        proc, deadline = self.procs[name], self.started[name] + START_TIMEOUT_S
        while time.perf_counter() < deadline:
            if "will now block" in open(self.log(name)).read():
                return time.perf_counter() - self.started[name]
            if proc.poll() is not None:
                break
            time.sleep(0.25)
        pytest.fail(f"ray start ({name}) did not come up (exit {proc.poll()}):\n{open(self.log(name)).read()[-3000:]}")

    def node_dir(self, ip: str) -> str:
        """The temp dir (logs) of the node at ``ip``: each machine keeps its own."""
        return osp.join(self.root, {HEAD_IP: "head", WORKER_IP: "worker"}[ip])

    def ours(self) -> dict[int, str]:
        """Live processes of this cluster: in a node's session, or running from the test's temp dir."""
        sids = {p.pid for p in self.procs.values()}
        return {pid: cmd for pid, (sid, cmd) in _sessions_and_cmdlines().items()
                if pid != os.getpid() and (sid in sids or self.root in cmd)}

    def stop(self) -> dict[int, str]:
        """SIGTERM each node (it stops what it started), SIGKILL what is left; returns the survivors (none)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.ours() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.ours():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        while self.ours() and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.ours()


@pytest.fixture
def ray_nodes():
    """A running head (127.0.0.2) and a joining worker (127.0.0.3), one CPU each; stopped, and checked gone, at
    teardown (also when the start fails)."""
    pytest.importorskip("ray.serve")
    if not osp.isdir("/proc/self"):
        pytest.skip("multi-node Ray on one machine is tested on Linux (the teardown reads /proc)")
    if not (osp.isfile(osp.join(BIN, "ray")) and osp.isfile(osp.join(BIN, "serve"))):
        pytest.skip(f"the ray / serve commands are not in {BIN}")
    root = tempfile.mkdtemp(prefix="oars-ray-", dir="/tmp")  # short: Ray's socket paths must stay < 108 chars
    token = osp.join(root, "ray_token")
    with open(token, "w") as f:
        f.write(os.urandom(32).hex())
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token, RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1",
               RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",  # a stopped test node has no traffic to drain
               RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING="0")  # the head's proxy picks among both nodes' replicas
    nodes = RayNodes(root, env)
    try:
        nodes.start("head", [
            "--head", "--node-ip-address", HEAD_IP, "--port", str(nodes.gcs_port), "--num-cpus", "1",
            "--dashboard-host", "127.0.0.1", "--dashboard-port", str(nodes.dashboard_port),
            "--dashboard-agent-listen-port", str(free_port()), "--ray-client-server-port", str(free_port())])
        print(f"\nray start --head: {nodes.wait_up('head'):.1f} s")
        nodes.start("worker", [
            "--address", f"{HEAD_IP}:{nodes.gcs_port}", "--node-ip-address", WORKER_IP, "--num-cpus", "1",
            "--dashboard-agent-listen-port", str(free_port())])  # joins while the test deploys (wait_up)
        yield nodes
    finally:
        t0 = time.perf_counter()
        survivors = nodes.stop()
        print(f"stop: {time.perf_counter() - t0:.1f} s")
        if not survivors:
            shutil.rmtree(root, ignore_errors=True)
        assert not survivors, f"processes survived the cluster's teardown: {survivors}"


def ray_cli(nodes: RayNodes, *args: str, timeout: float = 120) -> str:
    """Run ``ray ARGS`` / ``serve ARGS`` (first arg: the command) with the cluster's env; its stdout."""
    done = subprocess.run([osp.join(BIN, args[0]), *args[1:]], capture_output=True, text=True, env=nodes.env,
                          timeout=timeout, cwd=nodes.root)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def replica_actors(nodes: RayNodes) -> list[dict]:
    """The application's live replicas (``ray list actors``, Ray's state API through the dashboard)."""
    actors = json.loads(ray_cli(nodes, "ray", "list", "actors", "--address", nodes.dashboard, "--format", "json"))
    return [a for a in actors if a["class_name"].startswith("ServeReplica:oars:") and a["state"] == "ALIVE"]


def answered(nodes: RayNodes, replicas: dict[str, str]) -> dict[str, int]:
    """Replica id -> the ``POST /predict 200`` lines in its Ray Serve log, read from the temp dir of the node
    (``replicas``: id -> node IP) it runs on."""
    counts = {}
    for rid, ip in replicas.items():
        path = osp.join(nodes.node_dir(ip), "session_latest", "logs", "serve", f"replica_oars_OarsModel_{rid}.log")
        counts[rid] = open(path, errors="replace").read().count("POST /predict 200") if osp.isfile(path) else 0
    return counts


def wait_for(what: str, check: Callable[[], object], timeout: float, nodes: RayNodes):
    """Poll ``check()`` until it returns a true value (returned); on a timeout fail with ``serve status``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    status = subprocess.run([osp.join(BIN, "serve"), "status", "-a", nodes.dashboard], capture_output=True,
                            text=True, env=nodes.env, timeout=60)
    pytest.fail(f"{what}: not within {timeout:.0f} s; serve status:\n{status.stdout[-3000:]}{status.stderr[-1500:]}")


def http_ok(url: str) -> bool:
    """Whether GET ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def test_head_and_worker_node_serve_the_written_config(ray_nodes, tmp_path):
    """write-config -> serve deploy on 2 nodes -> a replica on each -> both answer oars-infer's records (30 s idle,
    70-85 s on 2 busy cores: most of it Ray and Python starting; the phases are printed)."""
    t0 = time.perf_counter()
    nodes = ray_nodes
    export = write_tiny_segmentor(str(tmp_path / "tiny"))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    config = str(tmp_path / "serve.yaml")
    from oars_deploy.serve.cli import run as serve_cli

    serve_cli(["--model-dir", export, "--port", str(nodes.http_port), "--replicas", "2", "--replica-cpus", "1",
               "--token-file", str(token_file), "--write-config", config])
    ray_cli(nodes, "serve", "deploy", "-a", nodes.dashboard, config)
    t_deploy = time.perf_counter()
    print(f"ray start (worker): {nodes.wait_up('worker'):.1f} s")
    wait_for("GET /health 200", lambda: http_ok(f"http://127.0.0.1:{nodes.http_port}/health"), 150, nodes)

    # one replica per node: each node has 1 CPU and each replica needs 1 (the config's replica_cpus)
    actors = wait_for("2 live replicas", lambda: r if len(r := replica_actors(nodes)) == 2 else None, 60, nodes)
    listed = json.loads(ray_cli(nodes, "ray", "list", "nodes", "--address", nodes.dashboard, "--format", "json"))
    ip_of = {n["node_id"]: n["node_ip"] for n in listed if n["state"] == "ALIVE"}
    assert sorted(ip_of.values()) == [HEAD_IP, WORKER_IP]
    assert [n["node_ip"] for n in listed if n["is_head_node"]] == [HEAD_IP]
    replicas = {a["name"].rsplit("#", 1)[1]: ip_of[a["node_id"]] for a in actors}  # replica id -> node IP
    assert sorted(replicas.values()) == [HEAD_IP, WORKER_IP], actors
    t_ready = time.perf_counter()

    paths = write_images(str(tmp_path / "imgs"), [(40, 64), (32, 32), (50, 20)], seed=7)
    infer_main(["--model-dir", export, "-i", str(tmp_path / "imgs"), "-o", str(tmp_path / "out")])
    expected = {osp.basename(r["input"]): r for r in read_results(str(tmp_path / "out"))}
    client = Server(f"http://127.0.0.1:{nodes.http_port}", None, export, str(token_file), nodes.log("head"))
    assert client.request("POST", "/predict", b"x", {"Content-Type": "image/png"}, token=None)[0] == 401
    # the head's proxy picks a replica per request: send the images round until both nodes' replicas have
    # answered (a replica still loading its model answers 503 + Retry-After; a client retries those)
    sent, counts, deadline = 0, {}, time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in paths:
            name = osp.basename(path)
            with open(path, "rb") as f:
                status, _, body = client.request("POST", "/predict", f.read(),
                                                 {"Content-Type": "image/png", "X-Filename": name})
            assert status in (200, 503), body
            if status == 200:
                assert json.loads(body) == {**expected[name], "input": name}
                sent += 1
        counts = answered(nodes, replicas)
        if sent >= len(paths) and all(counts.values()):
            break
        time.sleep(0.2)
    by_node = {replicas[rid]: n for rid, n in counts.items()}
    assert sent >= len(paths) and all(counts.values()), f"answers per node: {by_node} (of {sent} answers)"
    print(f"deploy {t_deploy - t0:.1f} s, replicas ready {t_ready - t_deploy:.1f} s, {sent} answers {by_node} "
          f"{time.perf_counter() - t_ready:.1f} s; test body {time.perf_counter() - t0:.1f} s")
