"""Page times of the studio in a real browser: time to first render and to interactive of the datasets grid, the
runs table and a live run page, measured with the browser's own clocks (Paint Timing and Navigation Timing).

Starts ``oars-studio`` (``python -m oars.studio.cli``) over a fresh workspace and drives Debian's chromium through
Playwright (``/usr/bin/chromium``; never a browser Playwright downloads). Each load is a fresh browser context (no
browser cache), and reports, in ms from the start of the navigation:

- ``FCP``: first-contentful-paint (``performance.getEntriesByType('paint')``): the first render;
- ``interactive``, ``DCL``, ``load``: Navigation Timing's ``domInteractive``, ``domContentLoadedEventEnd`` and
  ``loadEventEnd`` (the grid's pictures are images of the page: ``load`` waits for them);
- ``part``: what the page fills in after it loaded: the grid's last picture received (resource timing), the live
  run page's first server-sent event swapped in by htmx and its loss curve drawn (uPlot's canvas).

Pages: the datasets grid (the demo shapes train split, ``--images`` images, registered first and scanned), its first
page and a later one, **cold** (the sample pictures deleted before each load: the studio draws every one) and
**warm** (drawn before, served from its cache); the runs table with ``--runs`` work dirs (config.yaml, scalar log and
text log, as a training leaves them); and a live run page (a run whose scalar and text logs grow while it is
measured). Median of ``--loads`` loads each; a markdown table printed and the numbers written to ``--json``.

    python benchmarks/studio_pages.py [--images 300] [--runs 50] [--loads 5] [--json /tmp/studio_pages.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"
CONFIG = "segmentation/unet/unet_demo_shapes"
GRID_PAGE_SIZE = 24  # oars.studio.samples.PAGE_SIZE
NAV_TIMES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
  const pictures = performance.getEntriesByType('resource').filter(e => e.initiatorType === 'img');
  return {fcp: fcp ? fcp.startTime : null, interactive: nav.domInteractive, dcl: nav.domContentLoadedEventEnd,
          load: nav.loadEventEnd, pictures: pictures.length ? Math.max(...pictures.map(e => e.responseEnd)) : null};
}"""
SSE_CLOCK = ("document.addEventListener('htmx:sseMessage', () => { window.__firstEvent = window.__firstEvent || "
             "performance.now(); });")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_work_dir(folder: Path, iters: int, per_epoch: int = 10, epochs: int = 2, stamp: str = "20260101_000000",
                   age_s: float = 600.0) -> Path:
    """A work dir as ``tools/train.py`` leaves it (config.yaml, the scalar log, the text log with mmengine's progress
    lines); ``age_s`` back-dates it (a run that ended), 0 leaves it fresh (a run still writing)."""
    logs = folder / stamp / "vis_data"
    logs.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(
        "model: {type: EncoderDecoder}\n"
        "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
        f"train_cfg: {{type: EpochBasedTrainLoop, max_epochs: {epochs}, val_interval: 1}}\n"
        "default_hooks:\n  checkpoint: {type: CheckpointHook, interval: 1, save_best: mIoU, rule: greater}\n"
        "default_scope: segmentation\n", encoding="utf-8")
    (logs / "scalars.json").write_text("", encoding="utf-8")
    (folder / stamp / f"{stamp}.log").write_text(f"2026/01/01 00:00:00 - mmengine - INFO - training "
                                                 f"configs/{CONFIG}.yaml: EncoderDecoder\n", encoding="utf-8")
    for it in range(1, iters + 1):
        append_iteration(folder, it, per_epoch, epochs, stamp)
    if age_s:
        old = time.time() - age_s
        for path in folder.rglob("*"):
            os.utime(path, (old, old))
    return folder


def append_iteration(folder: Path, it: int, per_epoch: int, epochs: int, stamp: str = "20260101_000000") -> None:
    """One more logged training iteration (and a validation line at an epoch's end), as a running training
    appends them."""
    epoch = (it - 1) // per_epoch + 1
    lines = [{"lr": 0.001, "loss": 2.0 / it, "decode.loss_ce": 1.5 / it, "time": 0.1, "data_time": 0.01,
              "epoch": epoch, "iter": it, "step": it}]
    if it % per_epoch == 0:
        lines.append({"mIoU": min(0.9, 0.3 + 0.05 * epoch), "aAcc": 0.9, "time": 0.05, "data_time": 0.01,
                      "step": epoch})
    with open(folder / stamp / "vis_data" / "scalars.json", "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines))
    with open(folder / stamp / f"{stamp}.log", "a", encoding="utf-8") as f:
        f.write(f"2026/01/01 00:00:00 - mmengine - INFO - Epoch(train) [{epoch}][{(it - 1) % per_epoch + 1}/"
                f"{per_epoch}]  lr: 1.0000e-03  eta: 0:01:00  loss: {2.0 / it:.4f}\n")


class Studio:
    """``oars-studio`` in a subprocess over ``workspace`` (as a user starts it), with an HTTP client."""

    def __init__(self, workspace: Path, data_roots: list[str]) -> None:
        import httpx

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        roots = [a for root in data_roots for a in ("--data-root", root)]
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        self.proc = subprocess.Popen([sys.executable, "-m", "oars.studio.cli", "--workspace", str(workspace),
                                      "--port", str(self.port), *roots], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = httpx.Client(base_url=self.url, follow_redirects=False, timeout=600)
        for _ in range(600):
            try:
                self.client.get("/health")
                return
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    raise SystemExit(f"oars-studio exited with status {self.proc.returncode}") from None
                time.sleep(0.2)
        raise SystemExit("oars-studio did not answer within 2 minutes")

    def register(self, data: str) -> str:
        """Register the demo config's train split on ``data`` and wait for its scan; returns the data set's id."""
        form = self.client.get("/datasets").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
        response = self.client.post("/datasets", data={"csrf_token": token, "config": CONFIG, "split": "train",
                                                       "data": data})
        if response.status_code != 303:
            raise SystemExit(f"registering {data} refused: {response.text[-500:]}")
        return response.headers["location"].rsplit("/", 1)[-1]

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def wait_scanned(workspace: Path, dataset_id: str) -> None:
    from oars.studio.background import wait_for

    status = wait_for(workspace / "datasets" / dataset_id, timeout=3600)
    if not status or status.get("state") != "finished":
        raise SystemExit(f"the scan of {dataset_id} did not finish: {status}")


def load_times(browser, url: str, part: str | None = None, before=None) -> dict:
    """One load of ``url`` in a fresh context: the navigation's times and, with ``part`` (a JS expression giving a
    time), that too. ``before()`` runs first (e.g. deleting the cached pictures)."""
    if before is not None:
        before()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.add_init_script(SSE_CLOCK)
        page.goto(url, wait_until="load", timeout=600_000)
        page.wait_for_function("performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        # the paint entry is queued after the first frame, which a busy machine may draw after the load event
        page.wait_for_function("performance.getEntriesByType('paint').some(e => e.name === 'first-contentful-paint')",
                               timeout=60_000)
        times = page.evaluate(NAV_TIMES)
        if part:
            page.wait_for_function(f"({part}) !== null", timeout=120_000)
            times["part"] = page.evaluate(part)
        return times
    finally:
        context.close()


def median_times(samples: list[dict]) -> dict:
    keys = {k for s in samples for k, v in s.items() if v is not None}
    return {k: round(statistics.median(s[k] for s in samples if s.get(k) is not None), 1) for k in sorted(keys)}


def measure(images: int, runs: int, loads: int, data: str | None) -> dict:
    """Build the workspace, start the studio, load each page ``loads`` times; returns the medians per page."""
    from playwright.sync_api import sync_playwright

    from oars.data.demo_shapes import generate

    workspace = Path(tempfile.mkdtemp(prefix="oars-studio-pages-"))
    roots = []
    if data is None:
        data = str(workspace / "data" / f"shapes_{images}")
        generate(data, num_train=images, num_val=4)
    else:
        roots.append(os.path.dirname(os.path.abspath(data)))
    for i in range(runs):
        write_work_dir(workspace / "runs" / f"run_{i:03d}", iters=20)
    live = write_work_dir(workspace / "runs" / "live", iters=5, per_epoch=1000, epochs=1, age_s=0)
    studio = Studio(workspace, roots)
    stop = threading.Event()

    def grow() -> None:  # the live run: one logged iteration every half second
        it = 5
        while not stop.wait(0.5):
            it += 1
            append_iteration(live, it, 1000, 1)

    results: dict = {"images": images, "runs": runs, "loads": loads, "pages": []}
    try:
        started = time.monotonic()
        dataset_id = studio.register(data)
        wait_scanned(workspace, dataset_id)
        results["scan_s"] = round(time.monotonic() - started, 1)
        pictures = workspace / "datasets" / dataset_id / "samples"
        grid_pages = -(-images // GRID_PAGE_SIZE)
        later = grid_pages // 2 + 1 if grid_pages > 1 else 1  # a page in the middle

        def cold() -> None:
            shutil.rmtree(pictures, ignore_errors=True)

        studio.client.get("/runs")  # the table's first scan indexes the work dirs
        grower = threading.Thread(target=grow, daemon=True)
        grower.start()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                pages = [(f"datasets grid, page 1 ({images} images)", "cold", f"/datasets/{dataset_id}", None, cold),
                         (f"datasets grid, page 1 ({images} images)", "warm", f"/datasets/{dataset_id}", None, None),
                         (f"datasets grid, page {later}", "cold", f"/datasets/{dataset_id}?page={later}", None, cold),
                         (f"datasets grid, page {later}", "warm", f"/datasets/{dataset_id}?page={later}", None, None),
                         (f"runs table ({runs + 1} runs)", "", "/runs", None, None),
                         ("live run page: first event", "", "/runs/live", "window.__firstEvent || null", None),
                         ("live run page: loss curve drawn", "", "/runs/live",
                          "document.querySelector('#curve-loss canvas') ? performance.now() : null", None)]
                for name, state, path, part, before in pages:
                    if state == "warm":  # the pictures drawn once before the warm loads
                        load_times(browser, studio.url + path)
                    samples = [load_times(browser, studio.url + path, part, before) for _ in range(loads)]
                    results["pages"].append({"page": name, "state": state, "path": path, **median_times(samples)})
            finally:
                browser.close()
    finally:
        stop.set()
        studio.close()
        shutil.rmtree(workspace, ignore_errors=True)
    return results


def table(results: dict) -> str:
    """The markdown table of the medians (ms from the navigation's start)."""

    def ms(row: dict, key: str) -> str:
        return f"{row[key]:.0f}" if row.get(key) is not None else "-"

    lines = ["| page | sample pictures | FCP | interactive | DOMContentLoaded | load | part filled in |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in results["pages"]:
        part = row.get("part", row.get("pictures") if row["page"].startswith("datasets") else None)
        lines.append(f"| {row['page']} | {row['state'] or '-'} | {ms(row, 'fcp')} | {ms(row, 'interactive')} | "
                     f"{ms(row, 'dcl')} | {ms(row, 'load')} | {f'{part:.0f}' if part is not None else '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=300, help="training images of the demo shapes set")
    parser.add_argument("--runs", type=int, default=50, help="finished runs in the runs table (plus the live one)")
    parser.add_argument("--loads", type=int, default=5, help="loads per page (the median is reported)")
    parser.add_argument("--data", default=None, help="the demo shapes folder (default: data/demo_shapes when it "
                        "holds --images training images, else one generated in the workspace)")
    parser.add_argument("--json", default=os.path.join(tempfile.gettempdir(), "studio_pages.json"))
    args = parser.parse_args(argv)
    for flag in ("images", "runs", "loads"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} {getattr(args, flag)}: expected a positive number")
    if not os.path.isfile(CHROMIUM):
        raise SystemExit(f"{CHROMIUM}: no chromium (apt-get install chromium; .ci/run installs it)")
    data = args.data
    if data is None:
        repo = os.path.join(ROOT, "data", "demo_shapes")
        if os.path.isdir(os.path.join(repo, "images", "train")) and \
                len(os.listdir(os.path.join(repo, "images", "train"))) == args.images:
            data = repo
    elif not os.path.isdir(data):
        raise SystemExit(f"--data {data}: no such folder (make it: python -m oars.data.demo_shapes --out {data})")
    results = measure(args.images, args.runs, args.loads, data)
    results["machine"] = f"{platform.node()}, {os.cpu_count()} CPUs"
    results["date"] = time.strftime("%Y-%m-%d %H:%M")
    print(f"studio pages in chromium, median of {args.loads} loads, ms from the navigation's start "
          f"({results['date']}, {results['machine']}; the {args.images}-image scan took {results['scan_s']} s):")
    print(table(results))
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(f"written: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
