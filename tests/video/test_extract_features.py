"""tools/extract_features.py (video.features): snippet features of long videos from a recognizer, for BMN.

Two generated motion videos of 21 and 30 frames, random TSM-R18-demo weights (the values need not mean anything):
the snippet count and feature shape per video, one snippet's input and features against the test pipeline's
own clip for the same frame indices, the resume rule, an unreadable file listed through the CLI (exit 2) while
the others are written, and -o inside -i refused."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
import torch
from demo_utils import ROOT, random_checkpoint, run_tool

from oars.config import load_config
from oars_deploy.output_paths import OutputPathError

CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
FRAMES = {"a": 21, "b": 30}
SNIPPET, STRIDE = 8, 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(videos folder, checkpoint, config): the two videos, random weights of the demo TSM."""
    from video.demo_data import render_clip, write_video

    videos = tmp_path_factory.mktemp("long_videos")
    rng = np.random.default_rng(0)
    for cls, (name, num) in enumerate(FRAMES.items()):
        write_video(videos / f"{name}.mp4", render_clip(rng, cls, 64, num))
    ckpt = random_checkpoint(CFG, [], tmp_path_factory.mktemp("tsm_weights"))
    return videos, ckpt, load_config(CFG)


def _extract(setup, out, **kwargs):
    from video.features.extract import extract_features

    videos, ckpt, cfg = setup
    kwargs = {"snippet": SNIPPET, "stride": STRIDE, "workers": 0, **kwargs}
    return extract_features(cfg, ckpt, str(videos), str(out), **kwargs)


def test_snippet_rule_and_default_length():
    from video.features.frames import VideoInfo
    from video.features.outputs import entry
    from video.features.snippets import SnippetPipeline, num_snippets

    assert [num_snippets(f, 8, 4) for f in (5, 8, 11, 12, 21, 30)] == [1, 1, 1, 2, 4, 6]
    assert num_snippets(30, 8, 8) == 3
    short = entry(VideoInfo(total_frames=5, fps=10.0, duration_second=0.5), 1, 8, 8)
    assert short["feature_frame"] == 5 and short["duration_frame"] == 5  # one snippet of the 5 frames there are
    assert SnippetPipeline(load_config(CFG)).default_snippet == 8  # 1x1x8: one frame per segment
    r2plus1d = load_config(os.path.join(ROOT, "configs/video/r2plus1d/r2plus1d_r18_kinetics400.yaml"))
    assert SnippetPipeline(r2plus1d).default_snippet == 640  # 32 frames x interval 2 x 10 test clips


def test_shapes_and_index(setup, tmp_path):
    summary = _extract(setup, tmp_path / "out")
    assert summary.written == ["a", "b"] and not summary.skipped and not summary.failures
    index = json.loads((tmp_path / "out" / "videos.json").read_text())
    for vid, num in FRAMES.items():
        feats = np.load(tmp_path / "out" / f"{vid}.npy")
        count = (num - SNIPPET) // STRIDE + 1
        assert feats.shape == (count, 16 * 8) and feats.dtype == np.float32  # ResNet-18 at base 16: 128 channels
        assert np.isfinite(feats).all()
        scores = np.load(tmp_path / "out" / f"{vid}.scores.npy")  # mean of the 8 demo classes' softmax
        assert scores.shape == (8,) and scores.dtype == np.float32 and abs(float(scores.sum()) - 1.0) < 1e-5
        assert index[vid] == {"duration_second": num / 8.0, "duration_frame": num, "num_frames": num, "fps": 8.0,
                              "feature_frame": count * STRIDE, "snippet": SNIPPET, "stride": STRIDE}
    from video.datasets import ActivityNetFeatureDataset  # what BMN reads: the index is its annotation file

    data = ActivityNetFeatureDataset(str(tmp_path / "out" / "videos.json"), test_mode=True, class_agnostic=True,
                                     data_prefix={"feature": str(tmp_path / "out")})
    b = data.get_data_info(1)
    assert b["feature_path"] == str(tmp_path / "out" / "b.npy") and b["feature_second"] == 6 * STRIDE / 8.0


def test_snippet_equals_the_test_pipelines_clip(setup, tmp_path):
    """Snippet 3 of b (frames 12..19) from the sequential decoder and rolling window equals the test pipeline's
    VideoInit -> VideoDecode (seeking decoder) -> Resize/CenterCrop/FormatShape clip for the same indices, and its
    row of b.npy equals the backbone's spatially and temporally averaged output on that clip."""
    from oars.inference import build_test_pipeline
    from oars.pipelines.model import init_model
    from video.features.frames import probe
    from video.features.snippets import SnippetPipeline
    from video.features.window import iter_snippets, snippet_frame_indices

    videos, ckpt, cfg = setup
    path, k = str(videos / "b.mp4"), 3
    snippets = SnippetPipeline(cfg)
    info = probe(path)
    sampled, indices = snippet_frame_indices(snippets, path, info, SNIPPET, STRIDE)
    assert indices[k].tolist() == list(range(12, 20))
    ours = list(iter_snippets(snippets, path, info, SNIPPET, STRIDE))[k]["inputs"]

    steps = build_test_pipeline(cfg).transforms
    names = [type(t).__name__ for t in steps]
    results = steps[names.index("VideoInit")]({"filename": path, "start_index": 0, "modality": "RGB"})
    results.update({key: sampled[key] for key in ("clip_len", "frame_interval", "num_clips")},
                   frame_inds=indices[k])
    for step in steps[names.index("VideoDecode"):]:
        results = step(results)
    reference = results["inputs"]
    assert ours.dtype == torch.uint8 and ours.shape == reference.shape == (8, 3, 64, 64)
    assert torch.equal(ours, reference)

    model = init_model(cfg, ckpt)
    with torch.no_grad():
        x = model.data_preprocessor({"inputs": [reference]}, False)["inputs"]  # [1, 8, 3, 64, 64]
        maps = model.backbone(x.reshape(-1, 3, 64, 64))
        maps = maps[-1] if isinstance(maps, (list, tuple)) else maps
        expected = maps.mean(dim=(2, 3)).reshape(1, 8, -1).mean(dim=1)[0].numpy()
    _extract(setup, tmp_path / "out", batch_size=4)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "b.npy")[k], expected, rtol=1e-5, atol=1e-5)


def test_a_rerun_skips_finished_videos(setup, tmp_path):
    out = tmp_path / "out"
    _extract(setup, out)
    b_before = (out / "b.npy").stat().st_mtime_ns
    again = _extract(setup, out)
    assert again.written == [] and again.skipped == ["a", "b"]
    (out / "a.npy").unlink()
    third = _extract(setup, out)
    assert third.written == ["a"] and third.skipped == ["b"]
    assert (out / "b.npy").stat().st_mtime_ns == b_before
    other = _extract(setup, out, stride=SNIPPET)  # other snippet settings: not the same features, redone
    assert other.written == ["a", "b"]
    assert json.loads((out / "videos.json").read_text())["a"]["stride"] == SNIPPET


def test_cli_lists_an_unreadable_video_and_writes_the_others(setup, tmp_path):
    videos, ckpt, _ = setup
    folder = tmp_path / "videos"
    shutil.copytree(videos, folder)
    (folder / "broken.mp4").write_bytes(b"not a video")
    out = tmp_path / "features"
    proc = run_tool("extract_features.py", "-c", CFG, "-w", ckpt, "-i", str(folder), "-o", str(out),
                    "--workers", "1", "--batch-size", "2", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "1 of 3 videos could not be read" in proc.stderr and "broken.mp4" in proc.stderr
    assert "wrote features of 2 videos" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["a.npy", "a.scores.npy", "b.npy", "b.scores.npy", "videos.json"]
    assert np.load(out / "b.npy").shape == ((FRAMES["b"] - 8) // 8 + 1, 128)  # default N = S = 8


def test_output_inside_the_input_is_refused(setup):
    videos, ckpt, _ = setup
    spec = importlib.util.spec_from_file_location("extract_features_tool",
                                                  os.path.join(ROOT, "tools", "extract_features.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(OutputPathError, match="is inside the input folder"):
        tool.main(["-c", CFG, "-w", ckpt, "-i", str(videos), "-o", str(videos / "features")])
    assert not (videos / "features").exists()
