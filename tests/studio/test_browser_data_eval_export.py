"""The issue's scenarios 1, 3 and 4 in a real browser (Debian's chromium through Playwright), against one studio:
(1) register a copy of the demo shapes with a planted annotation problem and see the grid and the problem; (3)
evaluate a tiny trained run from its page, open the worst image, click a confusion cell and see its images; (4)
export it, try an uploaded image and see the picture and the record, equal to the one ``oars-infer`` writes for the
same file. Screenshots of each page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oars_deploy.cli import run as oars_infer
from tests.studio.tiny_run import tiny_trained_run

BAD_LABEL = "labels/train/0005.png"


def test_register_demo_shapes_see_grid_and_planted_problem(studio_server, page, screenshot, demo_data):
    copy = studio_server.workspace.root / "data" / "shapes_planted"
    if not copy.exists():
        shutil.copytree(demo_data, copy)
        (copy / BAD_LABEL).write_bytes(b"\x89PNG truncated")
    page.goto(studio_server.url + "/datasets")
    page.select_option("select[name=config]", "segmentation/unet/unet_demo_shapes")
    page.select_option("select[name=split]", "train")
    page.fill("input[name=data]", "data/shapes_planted")
    screenshot(page, "datasets")
    page.click("text=Register and check")
    page.wait_for_url("**/datasets/shapes_planted-train", timeout=120_000)
    # the check runs in the background: "checking…" until the page reloads itself with the result
    page.wait_for_selector("#samples figure", timeout=180_000)
    problems = page.locator("#problems tr.problem")
    assert problems.count() == 1
    assert BAD_LABEL in problems.first.inner_text() and "could not read label map" in problems.first.inner_text()
    assert page.locator("#samples figure").count() == 16
    page.locator("#samples figure img").first.wait_for()
    assert page.evaluate("document.querySelector('#samples figure img').naturalWidth") > 0
    screenshot(page, "dataset")
    page.check("input[name=problem]")
    page.click("text=Filter")
    page.wait_for_url("**problem=1**")
    assert page.locator("#samples figure.bad").count() == 1
    assert "0005.png" in page.locator("#samples figure").first.inner_text()


@pytest.mark.slow
def test_evaluate_then_open_the_worst_image(studio_server, page, screenshot, demo_data, tmp_path_factory):
    run = tiny_trained_run(tmp_path_factory.getbasetemp(), demo_data)
    run_id = studio_server.workspace.register_run(run)
    page.goto(f"{studio_server.url}/runs/{run_id}/evaluate")
    page.select_option("select[name=checkpoint]", "best_mIoU_epoch_1")
    page.click("text=Evaluate on the test set")
    page.wait_for_selector("#metrics", timeout=240_000)  # htmx polls the job, then reloads with the results
    assert "mIoU" in page.locator("#metrics").inner_text()
    assert page.locator("#worst figure").count() >= 1
    page.frame_locator("iframe.report").locator("h1").wait_for()
    page.locator("iframe.report").scroll_into_view_if_needed()  # (chromium paints the report's frame once seen)
    screenshot(page, "evaluate")
    page.evaluate("window.scrollTo(0, 0)")  # (after a full-page capture chromium misplaces clicks below the fold)
    caption = page.locator("#worst figcaption").first.inner_text()
    page.locator("#worst figure a").first.click()
    page.wait_for_url("**/worst/0", timeout=60_000)
    assert page.locator("h1").inner_text() == caption and "mIoU" in caption
    assert page.evaluate("document.getElementById('worst-image').naturalWidth") > 0
    screenshot(page, "evaluate_worst")
    # click a cell of the confusion matrix (an error cell: ground truth one class, predicted another)
    page.go_back()
    page.wait_for_selector("#confusion")
    confused = page.locator("#confusion a[data-confused]")
    link = confused.first if confused.count() else page.locator("#confusion a").first
    count = int(link.inner_text())
    link.click()
    page.wait_for_url("**/evaluate/cell?**", timeout=60_000)
    assert page.locator("h1").inner_text().startswith("Ground truth")
    listed = page.locator("#cell-images figure").evaluate_all("els => els.map(e => Number(e.dataset.count))")
    assert len(listed) >= 1 and sum(listed) == count  # the images add up to the cell (the demo is under the cap)
    page.locator("#cell-images img").first.wait_for()
    assert page.evaluate("document.querySelector('#cell-images img').naturalWidth") > 0
    screenshot(page, "evaluate_cell")


@pytest.mark.slow
def test_export_and_try_an_image_like_oars_infer(studio_server, page, screenshot, demo_data, tmp_path_factory,
                                                  tmp_path):
    run = tiny_trained_run(tmp_path_factory.getbasetemp(), demo_data)
    run_id = studio_server.workspace.register_run(run)
    page.goto(f"{studio_server.url}/runs/{run_id}/export")
    page.fill("input[name=name]", "unet-browser")
    page.click("button:has-text('Export')")
    page.wait_for_url("**/exports/unet-browser")
    page.wait_for_selector("text=Try it", timeout=240_000)  # the page reloads when the export job ends
    assert "model.onnx" in page.locator("#files").inner_text()
    image = Path(demo_data) / "images" / "val" / "0001.png"
    page.set_input_files("input[name=file]", str(image))
    page.click("button:has-text('Run')")
    page.wait_for_selector("#try-record")
    assert page.evaluate("document.querySelector('img.try-picture').naturalWidth") > 0
    shown = json.loads(page.locator("#try-record").inner_text())
    export_dir = studio_server.workspace.exports_dir / "unet-browser"
    oars_infer(["--model-dir", str(export_dir), "-i", shown[0]["input"], "-o", str(tmp_path / "cli")])
    expected = [json.loads(line) for line in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    assert shown == expected
    screenshot(page, "export")
    page.goto(studio_server.url + "/exports")
    assert "unet-browser" in page.locator("#exports").inner_text()
    screenshot(page, "exports")
