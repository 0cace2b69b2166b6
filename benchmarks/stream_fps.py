"""Stream throughput: frames/s of ``oars-infer -i VIDEO``'s stream path (decode with PyAV, predict, draw, encode the
annotated H.264 video, write the records; the model loaded once beforehand, as a long stream amortises it) against
the in-process predictor alone on the same decoded frames (frames already in memory, ``Predictor.predict`` in the
same batches, nothing drawn or written), for the U-Net and YOLOv3 demo exports
(random weights, dynamic batch: the exports of benchmarks/serve_load.py, made once under work_dirs/serve_load/)
or any export folder (``--model-dir``); YOLOv3 also with ``--track`` (ByteTrack on every frame).

    python benchmarks/stream_fps.py [--models unet yolov3] [--model-dir EXPORT] [--frames 48] [--size 320x240]
                                    [--batch-size 4] [--repeats 3] [--warmup 1]

The video is generated (moving shapes, ``--size`` WxH at 25 fps) under work_dirs/stream_fps/. Each side runs
``--repeats`` times in turn after ``--warmup`` untimed runs (drift in machine speed hits both alike); printed per
model: the median frames/s of each, the ratio stream / predictor of wall-clock time and of this process's CPU time
(the steadier measure on shared cores; goal >= 0.5 on the CPU: decoding, drawing and encoding a frame should cost
no more than the model). The cheapest run: ``--models unet --frames 4 --size 64x48 --repeats 1 --warmup 0``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

OUT = os.path.join(ROOT, "work_dirs", "stream_fps")
NAMES = {"unet": "U-Net", "yolov3": "YOLOv3-DarkNet53"}
GOAL = 0.5


def write_video(path: str, frames: int, width: int, height: int, fps: float = 25.0) -> str:
    """An H.264 file of ``frames`` frames: two filled rectangles moving across a gradient (written once)."""
    from oars_deploy.streams import VideoWriter

    if os.path.isfile(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ramp = np.linspace(40, 160, width, dtype=np.float32)[None, :, None]
    base = np.broadcast_to(ramp, (height, width, 3)).astype(np.uint8)
    bw, bh = max(width // 6, 2), max(height // 4, 2)
    tmp = path + ".part.mp4"
    with VideoWriter(tmp, fps) as writer:
        for t in range(frames):
            img = base.copy()
            x = (5 * t) % max(width - bw, 1)
            img[height // 4:height // 4 + bh, x:x + bw] = (30, 200, 240)
            img[height // 2:height // 2 + bh, width - bw - x:width - x] = (220, 60, 60)
            writer.write(img)
    os.replace(tmp, path)
    return path


def decoded_frames(path: str) -> list[np.ndarray]:
    """Every frame of ``path`` (BGR), decoded by the stream reader the CLI uses."""
    from oars_deploy.streams import FrameStream, stream_source

    with FrameStream(stream_source(path)) as stream:
        return [frame.image for frame in stream]


def time_sides(sides: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, tuple[float, float]]:
    """``{name: (median wall s, median CPU s of this process)}``, the sides run in turn."""
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(max(repeats, 1)):
        for name, fn in sides.items():
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append((time.perf_counter() - start, time.process_time() - cpu))
    return {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}


def measure(model_dir: str, video: str, batch: int, repeats: int, warmup: int, track: bool) -> dict[str, float]:
    """Frames/s of the stream path and of the predictor alone (wall and CPU), one model."""
    from oars_deploy.cli import parse_args
    from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
    from oars_deploy.plugins import predictor_for
    from oars_deploy.predictor import Predictor
    from oars_deploy.records import write_results
    from oars_deploy.streams import stream_source
    from oars_deploy.streams.run import run_stream

    frames = decoded_frames(video)
    predictor = Predictor(model_dir)  # loaded once, shared: the model's start-up is not a per-frame cost
    deploy_path = os.path.join(model_dir, DEPLOY_FILE)
    plugin = predictor_for(read_deploy_yaml(deploy_path), deploy_path)
    out = tempfile.mkdtemp(prefix="stream_fps_")
    args = parse_args(["--model-dir", model_dir, "-i", video, "-o", out, "--batch-size", str(batch)]
                      + (["--track"] if track else []))

    def stream() -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # the summary line, once per run
            write_results(run_stream(plugin, predictor, args, stream_source(video)).records, out)

    def alone() -> None:
        for start in range(0, len(frames), batch):
            predictor.predict(frames[start:start + batch])

    try:
        medians = time_sides({"stream": stream, "predictor": alone}, repeats, warmup)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    n = len(frames)
    (sw, sc), (pw, pc) = medians["stream"], medians["predictor"]
    return {"frames": n, "stream_fps": n / sw, "predictor_fps": n / pw, "ratio_wall": pw / sw,
            "ratio_cpu": pc / sc if sc > 0 else float("nan")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(NAMES), choices=list(NAMES))
    parser.add_argument("--model-dir", default=None, help="an export folder instead of --models")
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--size", default="320x240", help="video WxH (default 320x240)")
    parser.add_argument("--batch-size", type=int, default=4, help="frames per predict call, both sides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size: expected WxH such as 320x240, got {args.size!r}")
    if args.frames < 1 or args.batch_size < 1 or width < 2 or height < 2:
        parser.error("--frames and --batch-size must be >= 1, the size at least 2x2")
    video = write_video(os.path.join(OUT, f"moving_{width}x{height}_{args.frames}.mp4"), args.frames, width, height)
    if args.model_dir is not None:
        runs = [(os.path.basename(os.path.normpath(args.model_dir)), args.model_dir, False)]
    else:
        from benchmarks.serve_load import export_model

        runs = []
        for key in args.models:
            folder = export_model(key)
            runs.append((NAMES[key], folder, False))
            if key == "yolov3":
                runs.append((f"{NAMES[key]} --track", folder, True))
    print(f"stream vs predictor alone: {args.frames} frames of {width}x{height}, batch {args.batch_size}, "
          f"{args.repeats} runs each (median)")
    print("| model | stream frames/s | predictor frames/s | ratio wall | ratio CPU |")
    print("|---|---|---|---|---|")
    for name, folder, track in runs:
        r = measure(folder, video, args.batch_size, args.repeats, args.warmup, track)
        print(f"| {name} | {r['stream_fps']:.1f} | {r['predictor_fps']:.1f} | {r['ratio_wall']:.3f} | "
              f"{r['ratio_cpu']:.3f} |")
    print(f"ratio = stream frames/s / predictor frames/s on the same decoded frames (goal >= {GOAL})")


if __name__ == "__main__":
    main()
