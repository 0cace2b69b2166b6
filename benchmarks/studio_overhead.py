"""The studio's own CPU cost while it watches a training run, against the run's CPU time (goal: <= 2 %).

Starts ``oars-studio`` (``python -m oars.studio.cli``) over a fresh workspace, launches the U-Net demo config through
its Train form (the demo data, ``--epochs`` epochs, no DataLoader workers), and watches the run as an open browser
tab does: the four curve series fetched once, then the run page's server-sent event stream (``/runs/ID/events``,
which stats the run's files every 1-3 s and sends the live part with the new curve points when they changed), a
series fetched again only when one it has not drawn appears. Measured: the studio process's CPU time (user +
system, from ``psutil`` when installed, else ``/proc/<pid>/stat``) from the launch to the run's end, and the run's
own CPU time (the job records it in ``studio_job.json``, its data workers included). The launch request (the
config checker, which imports the task's registries once) is counted apart.

    python benchmarks/studio_overhead.py [--epochs 2] [--logger-interval 1] [--data data/demo_shapes]

``--logger-interval 1`` (the default) logs every iteration, so every second brings new lines to draw: the
studio's worst case; the demo config's own interval (19) gives it less to do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = "segmentation/unet/unet_demo_shapes"
PARTS = ("loss", "lr", "val", "other")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    try:
        import psutil

        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except ImportError:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _watch(client, run_id: str, done: threading.Event, counts: dict) -> None:
    """What an open run page does: fetch the four curve series once, follow the event stream; each event carries
    the points logged since (appended by the page), and a part is fetched again only when a series it has not
    drawn appears (as ``oarsStudio.takePoints`` does)."""
    drawn: dict[str, set] = {}
    for part in PARTS:
        drawn[part] = set(client.get(f"/runs/{run_id}/scalars.json", params={"part": part}).json()["series"])
    page = client.get(f"/runs/{run_id}").text
    found = re.search(r'sse-connect="(/runs/[^"]+/events[^"]*)"', page)
    url = found.group(1).replace("&amp;", "&") if found else f"/runs/{run_id}/events"
    with client.stream("GET", url, timeout=None) as response:
        data: list[str] = []
        for line in response.iter_lines():
            if line.startswith("event: "):
                counts["events"] += 1
                if line == "event: end":
                    break
            elif line.startswith("data: "):
                data.append(line[6:])
            elif not line and data:
                points = re.search(r'id="run-points">(.*?)</script>', "\n".join(data), re.S)
                data = []
                for part, add in (json.loads(points.group(1)) if points else {}).items():
                    if add["x"] and not set(add["series"]) <= drawn[part]:
                        counts["refetches"] += 1
                        drawn[part] = set(client.get(f"/runs/{run_id}/scalars.json",
                                                     params={"part": part}).json()["series"])
    done.set()


def measure(epochs: int, logger_interval: int, data: str) -> dict:
    """Run one watched training; returns the CPU seconds of the studio and of the run, and their ratio."""
    try:
        import httpx  # the client FastAPI's TestClient uses (installed with the test tools)
    except ImportError:
        raise SystemExit("benchmarks/studio_overhead.py needs httpx: pip install httpx") from None

    port = _free_port()
    workspace = tempfile.mkdtemp(prefix="oars-studio-bench-")
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    studio = subprocess.Popen([sys.executable, "-m", "oars.studio.cli", "--workspace", workspace, "--port", str(port)],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False, timeout=60)
        for _ in range(300):
            try:
                client.get("/health")
                break
            except httpx.TransportError:
                time.sleep(0.2)
        page = client.get("/train", params={"config": CONFIG})
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        extra = "\n".join([f"{s}.dataset.data_root={data}" for s in ("train_dataloader", "val_dataloader",
                                                                     "test_dataloader")] +
                          [f"{s}.num_workers=0" for s in ("train_dataloader", "val_dataloader", "test_dataloader")] +
                          [f"{s}.persistent_workers=False" for s in ("train_dataloader", "val_dataloader",
                                                                     "test_dataloader")] +
                          [f"default_hooks.logger.interval={logger_interval}"])
        at_launch = cpu_seconds(studio.pid)
        start = time.monotonic()
        launched = client.post("/train/launch", data={"csrf_token": token, "config": CONFIG, "length": str(epochs),
                                                      "extra": extra})
        if launched.status_code != 303:
            raise SystemExit(f"launch refused: {launched.text[-500:]}")
        before = cpu_seconds(studio.pid)  # the launch (the config check, once) is counted apart from the watching
        run_id = launched.headers["location"].rsplit("/", 1)[-1]
        done, counts = threading.Event(), {"events": 0, "refetches": 0}
        watcher = threading.Thread(target=_watch, args=(client, run_id, done, counts), daemon=True)
        watcher.start()
        done.wait(timeout=3600)
        studio_cpu = cpu_seconds(studio.pid) - before
        wall = time.monotonic() - start
        run = next(r for r in client.get("/api/runs").json()["runs"] if r["id"] == run_id)
        record = json.loads(open(os.path.join(run["work_dir"], "studio_job.json"), encoding="utf-8").read())
    finally:
        studio.terminate()
        studio.wait(timeout=30)
    return {"status": run["status"], "iterations": run["done"], "wall_s": round(wall, 1),
            "events": counts["events"], "curve_refetches": counts["refetches"],
            "launch_cpu_s": round(before - at_launch, 2),
            "studio_cpu_s": round(studio_cpu, 2), "run_cpu_s": record.get("cpu_s"),
            "overhead_pct": round(100 * studio_cpu / record["cpu_s"], 2) if record.get("cpu_s") else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--logger-interval", type=int, default=1)
    parser.add_argument("--data", default=os.path.join(ROOT, "data", "demo_shapes"),
                        help="the demo shapes folder, generated there when absent")
    args = parser.parse_args()
    from oars.data.demo_shapes import generate

    generate(args.data)  # the demo set, written once and reused; a foreign non-empty folder is refused
    result = measure(args.epochs, args.logger_interval, args.data)
    print(json.dumps(result, indent=1))
    print(f"studio CPU watching {result['studio_cpu_s']} s over a run of {result['run_cpu_s']} s CPU: "
          f"{result['overhead_pct']} % (goal <= 2 %); the launch (config check, once): {result['launch_cpu_s']} s")


if __name__ == "__main__":
    main()
