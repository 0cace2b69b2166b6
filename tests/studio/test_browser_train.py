"""The issue's scenario 2 in a real browser (Debian's chromium through Playwright): open Train, pick the U-Net demo
config, set 1 epoch, launch, watch the curve and the progress update live on the run's page (server-sent events),
stop it, resume it to the end. Screenshots of each page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.studio.conftest import REPO
from tests.studio.runs_helpers import DEMO_NAME, tiny_overrides


@pytest.fixture(scope="module")
def shapes_300(tmp_path_factory) -> str:
    """The demo shapes set (300 training images): the repository's data/demo_shapes, else generated."""
    repo = REPO / "data" / "demo_shapes"
    if (repo / "annotations" / "instances_train.json").is_file():
        return str(repo)
    from oars.data.demo_shapes import generate

    out = tmp_path_factory.mktemp("shapes")
    generate(str(out), num_train=300, num_val=20)
    return str(out)


def _progress(page) -> str:
    return page.locator("#run-progress").inner_text()


@pytest.mark.slow
def test_launch_watch_stop_resume(studio_server, page, screenshot, shapes_300):
    page.goto(studio_server.url + "/train")
    page.click("summary:has-text('segmentation')")  # open the task's group
    page.click(f'a[href="/train?config={DEMO_NAME}"]')
    page.wait_for_selector("#launch-form")
    page.wait_for_selector("#size")  # the size, fetched after the page rendered
    page.fill("#length", "1")
    # one image a batch (300 iterations), a checkpoint every 10: long enough to watch and stop, then resume
    extra = tiny_overrides(shapes_300, **{"model.backbone.base_channels": 16, "model.decode_head.channels": 16,
                                          "default_hooks.checkpoint.by_epoch": False,
                                          "default_hooks.checkpoint.interval": 10})
    extra = extra.replace("train_dataloader.batch_size=4", "train_dataloader.batch_size=1")
    page.fill("#extra", extra)
    page.wait_for_selector("#check-ok", timeout=60_000)  # the live check of the form as it stands
    screenshot(page, "train")
    page.click("#launch-button")
    page.wait_for_url(re.compile(r"/runs/unet_demo_shapes_\d+"))
    run_url = page.url
    page.wait_for_selector("#curve-loss canvas", timeout=120_000)  # uPlot drew the first loss values
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "scalars.json" in r.url else None)
    drawn = page.evaluate("document.querySelector('#curve-loss')._data.x.length")
    first = _progress(page)
    page.wait_for_function(f"document.querySelector('#run-progress').innerText !== {first!r}", timeout=60_000)
    # the events carry the new points: the loss curve grows in place, its series is not fetched again
    page.wait_for_function(f"document.querySelector('#curve-loss')._data.x.length > {drawn}", timeout=60_000)
    assert not [u for u in fetched if "part=" not in u], fetched
    assert re.search(r"iteration \d+/300", _progress(page)), _progress(page)
    page.wait_for_selector("text=last checkpoint:", timeout=120_000)
    screenshot(page, "run_live")
    page.click("#stop")
    page.wait_for_selector("#run-status.stopped", timeout=120_000)
    assert "resume" in page.locator("#run-message").inner_text()
    stopped_at = int(re.search(r"iteration (\d+)/", _progress(page)).group(1))
    assert 0 < stopped_at < 300
    screenshot(page, "run_stopped")
    page.click("#resume")
    page.wait_for_url(run_url)
    page.wait_for_selector("#run-status.finished", timeout=300_000)
    assert "iteration 300/300 (100 %)" in _progress(page)
    page.reload()  # the finished page: every curve drawn from the run's files
    page.wait_for_selector("#curve-val canvas")
    screenshot(page, "run_finished")
    page.goto(studio_server.url + "/runs")
    run_id = run_url.rsplit("/", 1)[-1]
    row = page.locator(f"#runs tr:has(a[href='/runs/{run_id}'])")
    assert "finished" in row.inner_text() and "mIoU" in row.inner_text()
    shot = screenshot(page, "runs")
    assert Path(shot).stat().st_size > 1000
