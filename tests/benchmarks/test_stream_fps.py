"""benchmarks/stream_fps.py's measurement on a tiny hand-built export (``--model-dir``: no torch export, a second):
both sides run on the same frames and the table row is printed. The demo-export form is the slow smoke run in
test_benchmarks_smoke.py."""

from __future__ import annotations

import re

from tiny_exports import tiny_detector_dir

from benchmarks import stream_fps


def test_stream_fps_measures_both_sides_on_a_tiny_export(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(stream_fps, "OUT", str(tmp_path / "videos"))
    model = tiny_detector_dir(str(tmp_path / "tinydet"))
    stream_fps.main(["--model-dir", model, "--frames", "6", "--size", "48x32", "--repeats", "1", "--warmup", "0",
                     "--batch-size", "2"])
    out = capsys.readouterr().out
    assert "stream vs predictor alone: 6 frames of 48x32, batch 2, 1 runs each" in out
    row = re.search(r"\| tinydet \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+|nan) \|", out)
    assert row is not None, out
    stream, alone, ratio = (float(v) for v in row.groups()[:3])
    assert stream > 0 and alone > 0 and abs(ratio - stream / alone) < 0.01 * ratio + 1e-3
    assert len(list((tmp_path / "videos").glob("*.mp4"))) == 1  # the generated video, written once
