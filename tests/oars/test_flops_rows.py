"""get_flops rows add up on every family: one config per family folder (configs/<task>/<family>/), model shrunk as
the config tests shrink it, counted on the export graph at depths 1-4: every expanded row equals the rows one level
below it, no row is negative, and the dense detection heads (FCOS, YOLOv3, ...) carry their convolutions."""

from __future__ import annotations

import glob
import os
import sys

import config_checks_detection
import config_checks_gan
import config_checks_segmentation
import config_checks_video
import pytest
from demo_utils import ROOT

from oars.analysis.flops import FlopsRow, count_flops
from oars.cli import run_cli
from oars.config import load_config
from oars.errors import OarsError

sys.path.insert(0, os.path.join(ROOT, "tools"))
import get_flops  # noqa: E402

SHRINK = {"segmentation": config_checks_segmentation, "detection": config_checks_detection,
          "video": config_checks_video, "gan": config_checks_gan}


def _one_per_family() -> list[str]:
    """The first config of each configs/<task>/<family>/ (sorted, demo configs first: they are the small ones)
    that has an ``export`` section (the graph get_flops counts; detection's fine-tuning recipes have none)."""
    picked = []
    for family in sorted(glob.glob(os.path.join(ROOT, "configs", "*", "*", ""))):
        if "_base_" in family:
            continue
        files = sorted(glob.glob(os.path.join(family, "*.yaml")), key=lambda p: ("demo" not in p, p))
        with_export = [p for p in files if "export" in load_config(p)]
        if with_export or files:
            picked.append((with_export or files)[0])
    return picked


FAMILIES = _one_per_family()


def _children_sums_hold(table: list[FlopsRow]) -> list[str]:
    """Rows whose direct children (own rows included) do not add up to them."""
    bad = []
    for i, row in enumerate(table):
        below = []
        for other in table[i + 1:]:
            if other.depth <= row.depth:
                break
            if other.depth == row.depth + 1:
                below.append(other)
        if below and sum(r.flops for r in below) != row.flops:
            bad.append(f"{row.path or '(root)'}: {row.flops} != {sum(r.flops for r in below)}")
    return bad


def test_every_family_is_covered():
    tasks = {os.path.relpath(p, os.path.join(ROOT, "configs")).split(os.sep)[0] for p in FAMILIES}
    assert tasks == set(SHRINK) and len(FAMILIES) >= 25


# temporal localisers are exported (and counted) with the recognizer that extracts their features:
# get_flops says so in one line (test_a_localiser_needs_its_recognizer)
LOCALISERS = ("video/bmn/", "video/ctcn/")
COUNTED = [p for p in FAMILIES if not any(k in p.replace(os.sep, "/") for k in LOCALISERS)]


@pytest.mark.slow
@pytest.mark.parametrize("path", COUNTED, ids=[os.path.relpath(p, os.path.join(ROOT, "configs")) for p in COUNTED])
def test_rows_add_up_at_every_depth(path):
    from oars.analysis.config_model import build_count_target

    cfg = load_config(path)
    cfg.model = SHRINK[cfg.default_scope].shrink_model(cfg.model.to_dict())
    try:
        target = build_count_target(cfg, (64, 64))
    except OarsError as err:  # inputs without image axes (features, noise + label): their own sample size
        assert "no spatial axes" in str(err)
        target = build_count_target(cfg, None)
    report = count_flops(target.module, target.inputs, target.input_names)
    assert report.flops > 0
    for depth in (1, 2, 3, 4):
        table = report.table(depth)
        assert table[0].flops == report.flops
        assert [r for r in table if r.flops < 0] == []
        assert _children_sums_hold(table) == []
    heads = [r for r in report.rows if r.path.endswith("bbox_head") and not r.own]
    assert all(r.flops > 0 for r in heads), heads  # the head's work is booked to the head


@pytest.mark.parametrize("config", ["fcos/fcos_r18_fpn_demo_shapes.yaml", "yolov3/yolov3_darknet53_demo_shapes.yaml"])
def test_the_cli_books_the_dense_head_and_prints_no_negative_row(config, capsys):
    """The bug report's case: at --depth 4 FCOS printed bbox_head 0 and "(outside submodules)" -102.19 M."""
    get_flops.main(["-c", os.path.join(ROOT, "configs", "detection", config), "--depth", "4", "--shape", "64"])
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.strip().startswith("decode.detector.bbox_head "))
    assert not head.split()[-2].startswith("0") and " -" not in out.split("-----")[-1]


@pytest.mark.parametrize("override, expected", [
    ("model.backbone.depth=19", "ResNet: depth=19 is not supported"),
    ("model.num_classes=0", "num_classes must be an int >= 1"),
])
def test_a_config_error_is_one_line(override, expected, capsys):
    config = os.path.join(ROOT, "configs", "detection", "fcos", "fcos_r18_fpn_demo_shapes.yaml")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: get_flops.main(["-c", config, "-o", override]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "model" in err.split(expected)[0]  # the key is named before the cause
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_localiser_needs_its_recognizer(capsys):
    config = next(p for p in FAMILIES if "bmn" in p)
    with pytest.raises(SystemExit):
        run_cli(lambda: get_flops.main(["-c", config]))
    err = capsys.readouterr().err
    assert "--recognizer-config" in err and "Traceback" not in err
