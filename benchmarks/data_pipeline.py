"""Images per second of the YOLOv3 training pipeline (COCO config's augmentation) with 0 and 2 workers;
with ``--task video``, video decoding time per clip per backend and clips per second of a TSM-like test pipeline.

Runs the train pipeline of ``configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml`` (load, photometric
distortion, Expand, MinIoURandomCrop, flip, resize to 608, pack) over the generated demo shapes set (COCO format,
written to data/demo_shapes if missing), through mmengine's data loader exactly as training builds it.
The first batch (worker start-up) is timed separately.

    python benchmarks/data_pipeline.py [--batches 30] [--batch-size 8] [--workers 0 2] [--data DIR]

``--task video`` generates the demo videos (data/demo_videos, 64x64, 16 frames, H.264) if missing, then times
(1) opening a clip and decoding the 8 frames of TSM's test sampling (SampleFrames 1x1x8, test_mode) with each
backend: PyAV, torchcodec (when installed) and the same frames as JPEG folders (written once under
data/demo_videos/rawframes), and (2) clips/s through a DataLoader (VideoInit, SampleFrames, VideoDecode,
Resize short side 64, CenterCrop 56, FormatShape NCHW, PackActionInputs) with each ``--workers`` value.

    python benchmarks/data_pipeline.py --task video [--clips 80] [--batches 20] [--batch-size 8] [--data DIR]

``--task features`` generates the long demo videos (data/demo_long_videos, 16-32 s of 64x64 at 8 fps) if missing,
then times ``tools/extract_features.py``'s work (video.features.extract.extract_features: decoding in DataLoader
workers, 8-frame snippets every 8 frames, the demo TSM-R18 at random weights, batches of ``--batch-size``
snippets) on the first ``--videos`` videos with each ``--workers`` value: snippets/s over the whole run (model
build and worker start included, as a user waits for them).

    python benchmarks/data_pipeline.py --task features [--videos 16] [--batch-size 8] [--workers 0 2] [--data DIR]

``--data DIR`` reads a set generated earlier (``python -m oars.data.demo_shapes --out DIR``, or
``video.demo_data.generate`` for ``--task video``) as it is, instead of data/demo_shapes or data/demo_videos
(written there with the default sizes when missing). The cheapest run of each task, to check that it works:
``--batches 1 --batch-size 1 --workers 0`` (video: also ``--clips 1``; features: ``--videos 1 --workers 0``).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT, ensure_demo_data  # noqa: E402

CONFIG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml")
RECOGNIZER_CONFIG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
LONG_VIDEO_ROOT = os.path.join(ROOT, "data", "demo_long_videos")


def loader_cfg(data_root: str, workers: int, batch_size: int) -> dict:
    from oars.config import load_config

    cfg = load_config(CONFIG, [
        f"train_dataloader.dataset.data_root={data_root}",
        "train_dataloader.dataset.ann_file=annotations/instances_train.json",
        "train_dataloader.dataset.data_prefix.img=images/train",
        "train_dataloader.dataset.classes=[circle,square,triangle]",
        f"train_dataloader.num_workers={workers}",
        f"train_dataloader.persistent_workers={workers > 0}",
        f"train_dataloader.batch_size={batch_size}",
    ])
    return copy.deepcopy(cfg.train_dataloader.to_dict())


def measure(data_root: str, workers: int, batches: int, batch_size: int) -> tuple[float, float]:
    """(seconds for the first batch, images/s over the next ``batches`` batches)."""
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner

    with DefaultScope.overwrite_default_scope("detection"):
        loader = Runner.build_dataloader(loader_cfg(data_root, workers, batch_size), seed=0)
    it = iter(loader)
    start = time.perf_counter()
    next(it)
    first = time.perf_counter() - start
    seen, start = 0, time.perf_counter()
    while seen < batches:
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        seen += 1
        _ = len(batch["inputs"])
    return first, batches * batch_size / (time.perf_counter() - start)


VIDEO_ROOT = os.path.join(ROOT, "data", "demo_videos")
TSM_TEST_SAMPLING = dict(type="SampleFrames", clip_len=1, frame_interval=1, num_clips=8, test_mode=True)


def _video_pipeline(backend: str) -> list[dict]:
    return [dict(type="VideoInit", backend=backend), TSM_TEST_SAMPLING, dict(type="VideoDecode"),
            dict(type="Resize", short_side=64), dict(type="CenterCrop", crop_size=56),
            dict(type="FormatShape", input_format="NCHW"), dict(type="PackActionInputs")]


def _write_rawframes(video_root: str, names: list[str]) -> list[tuple[str, int]]:
    """Every frame of the listed clips as JPEG files ``rawframes/<clip>/img_00001.jpg`` (once) and the list."""
    import cv2

    from video.datasets import open_video

    out = os.path.join(video_root, "rawframes")
    lines = []
    for name in names:
        folder = os.path.join(out, os.path.splitext(name)[0])
        with open_video(os.path.join(video_root, name)) as reader:
            total = reader.total_frames
            if not os.path.isfile(os.path.join(folder, f"img_{total:05d}.jpg")):
                os.makedirs(folder, exist_ok=True)
                for i, img in enumerate(reader.get_frames(list(range(total)))):
                    cv2.imwrite(os.path.join(folder, f"img_{i + 1:05d}.jpg"), img)
        lines.append((folder, total))
    return lines


def decode_times(video_root: str, num_clips: int) -> dict[str, float]:
    """Milliseconds per clip (open + the 8 TSM test frames) per backend over the first ``num_clips`` val clips."""
    from video.datasets import open_video, torchcodec_available
    from video.datasets.decoders import RawFrameReader
    from video.transforms import SampleFrames

    with open(os.path.join(video_root, "val_list.txt")) as f:
        names = [line.split()[0] for line in f if line.strip()][:num_clips]
    sampler = SampleFrames(**{k: v for k, v in TSM_TEST_SAMPLING.items() if k != "type"})
    folders = _write_rawframes(video_root, names)
    backends = ["pyav"] + (["torchcodec"] if torchcodec_available() else [])
    times = {}
    for backend in backends:
        for _rep in range(2):  # the first pass warms the page cache and the libraries
            start = time.perf_counter()
            for name in names:
                with open_video(os.path.join(video_root, name), backend) as reader:
                    inds = sampler({"total_frames": reader.total_frames, "start_index": 0})["frame_inds"]
                    reader.get_frames(inds)
            times[backend] = (time.perf_counter() - start) / len(names) * 1e3
    for _rep in range(2):
        start = time.perf_counter()
        for folder, total in folders:
            inds = sampler({"total_frames": total, "start_index": 1})["frame_inds"]
            RawFrameReader(folder, total, "img_{:05d}.jpg", 1).get_frames(inds)
        times["rawframes (JPEG)"] = (time.perf_counter() - start) / len(folders) * 1e3
    return times


def video_clips_per_s(video_root: str, backend: str, workers: int, batches: int,
                      batch_size: int) -> tuple[float, float]:
    """(seconds for the first batch, clips/s over the next ``batches`` batches) of the TSM-like test pipeline."""
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner

    import video.datasets  # noqa: F401 - registers the datasets and loading transforms
    import video.transforms  # noqa: F401

    cfg = dict(batch_size=batch_size, num_workers=workers, persistent_workers=workers > 0,
               sampler=dict(type="DefaultSampler", shuffle=False),
               dataset=dict(type="VideoDataset", ann_file="train_list.txt", data_root=video_root,
                            classes="classes.txt", test_mode=True, pipeline=_video_pipeline(backend)))
    with DefaultScope.overwrite_default_scope("video"):
        loader = Runner.build_dataloader(cfg, seed=0)
    it = iter(loader)
    start = time.perf_counter()
    next(it)
    first = time.perf_counter() - start
    seen, start = 0, time.perf_counter()
    while seen < batches:
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        seen += 1
        _ = len(batch["inputs"])
    return first, batches * batch_size / (time.perf_counter() - start)


def video_root(data: str | None) -> str:
    """The demo video set to read: ``data`` as it is, else data/demo_videos (generated when missing or stale).

    Args:
        data: ``--data``, a set generated earlier (its own clip count and size), or None.

    Returns:
        The folder holding the clips and their train_list.txt / val_list.txt.
    """
    from video.demo_data import generate

    if data is not None:
        if not os.path.isfile(os.path.join(data, "val_list.txt")):
            raise SystemExit(f"--data {data}: no val_list.txt there; expected a demo video set "
                             "(video.demo_data.generate)")
        print(f"demo videos: {data} (as it is)")
        return data
    start = time.perf_counter()
    res = generate(VIDEO_ROOT)
    made = "reused" if res["skipped"] else f"generated in {time.perf_counter() - start:.1f} s"
    print(f"demo videos ({res['codec']}, {sum(res['num_clips'].values())} clips of 64x64x16) {made}: {VIDEO_ROOT}")
    return VIDEO_ROOT


def video_main(args: argparse.Namespace) -> None:
    from video.datasets import torchcodec_available

    root = video_root(args.data)
    print(f"decode per clip (open + 8 frames of TSM test sampling), first {args.clips} val clips:")
    for backend, ms in decode_times(root, args.clips).items():
        print(f"  {backend:18s} {ms:7.2f} ms/clip")
    if not torchcodec_available():
        print("  torchcodec         not installed here (skipped)")
    print(f"TSM-like test pipeline (8 frames, crop 56) through a DataLoader, batch {args.batch_size}, "
          f"{args.batches} batches:")
    for backend in ["pyav"] + (["torchcodec"] if torchcodec_available() else []):
        rates = {}
        for workers in args.workers:
            first, rate = video_clips_per_s(root, backend, workers, args.batches, args.batch_size)
            rates[workers] = rate
            print(f"  {backend} workers={workers}: {rate:7.1f} clips/s (first batch {first:.2f} s)")
        if 0 in rates and len(rates) > 1:
            for workers, rate in rates.items():
                if workers:
                    print(f"  {backend} speed-up with {workers} workers: {rate / rates[0]:.2f}x")


def long_video_root(data: str | None) -> str:
    """The long demo video set: ``data`` as it is (``video.demo_long_videos.generate``), else data/demo_long_videos
    (generated when missing or stale). Returns the folder holding ``videos/``."""
    from video.demo_long_videos import generate

    if data is not None:
        if not os.path.isdir(os.path.join(data, "videos")):
            raise SystemExit(f"--data {data}: no videos/ there; expected a long demo video set "
                             "(tools/demo_data.py long-videos --out DIR)")
        return data
    res = generate(LONG_VIDEO_ROOT)
    return res["out_dir"]


def features_main(args: argparse.Namespace) -> None:
    """Snippets/s of the feature extractor with each ``--workers`` value (fresh output folder each)."""
    import tempfile

    import numpy as np
    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config
    from video.features.extract import extract_features

    root = long_video_root(args.data)
    names = sorted(f for f in os.listdir(os.path.join(root, "videos")) if f.endswith(".mp4"))[: args.videos]
    cfg = load_config(RECOGNIZER_CONFIG)
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "videos")
        os.makedirs(inputs)
        for name in names:  # the first --videos of the set, without copying them
            os.symlink(os.path.abspath(os.path.join(root, "videos", name)), os.path.join(inputs, name))
        torch.manual_seed(0)
        with DefaultScope.overwrite_default_scope("video"):
            model = MODELS.build(copy.deepcopy(cfg.model))
        ckpt = os.path.join(tmp, "tsm.pth")
        torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": [str(i) for i in range(
            cfg.model.num_classes)]}}}, ckpt)
        print(f"feature extraction (demo TSM-R18, 8-frame snippets, batch {args.batch_size}) of {len(names)} videos "
              f"of {root}:")
        rates = {}
        for workers in args.workers:
            out = os.path.join(tmp, f"features_{workers}")
            start = time.perf_counter()
            summary = extract_features(cfg, ckpt, inputs, out, workers=workers, batch_size=args.batch_size)
            elapsed = time.perf_counter() - start
            count = sum(np.load(os.path.join(out, f"{v}.npy"), mmap_mode="r").shape[0] for v in summary.written)
            rates[workers] = count / elapsed
            print(f"  workers={workers}: {rates[workers]:7.1f} snippets/s ({count} snippets in {elapsed:.2f} s)")
        if 0 in rates:
            for workers, rate in rates.items():
                if workers:
                    print(f"  speed-up with {workers} workers: {rate / rates[0]:.2f}x")


def detection_root(data: str | None) -> str:
    """The demo shapes set to read: ``data`` as it is, else data/demo_shapes (generated when missing or stale)."""
    if data is None:
        return ensure_demo_data()
    if not os.path.isfile(os.path.join(data, "annotations", "instances_train.json")):
        raise SystemExit(f"--data {data}: no annotations/instances_train.json there; expected a demo shapes set "
                         "(python -m oars.data.demo_shapes --out DIR)")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["detection", "video", "features"], default="detection",
                        help="detection: the YOLOv3 train pipeline (default); video: decoding and the TSM pipeline; "
                             "features: tools/extract_features.py on long videos")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--clips", type=int, default=80, help="video: clips timed per decoding backend")
    parser.add_argument("--videos", type=int, default=16, help="features: long videos to extract")
    parser.add_argument("--data", default=None, metavar="DIR",
                        help="a demo set generated earlier, read as it is (default: data/demo_shapes, or "
                             "data/demo_videos with --task video, generated when missing)")
    args = parser.parse_args()
    for name in ("batches", "batch_size", "clips", "videos"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if min(args.workers) < 0:
        parser.error(f"--workers must be 0 or more, got {args.workers}")
    import cv2

    cv2.setNumThreads(0)  # as training sets it (env_cfg.mp_cfg.opencv_num_threads): workers, not threads, scale
    if args.task == "video":
        video_main(args)
        return
    if args.task == "features":
        features_main(args)
        return
    root = detection_root(args.data)
    print(f"YOLOv3 train pipeline (608 px output) on {root}, batch {args.batch_size}, {args.batches} batches")
    results = {}
    for workers in args.workers:
        first, rate = measure(root, workers, args.batches, args.batch_size)
        results[workers] = rate
        print(f"  workers={workers}: {rate:7.1f} images/s (first batch {first:.2f} s)")
    if 0 in results and len(results) > 1:
        for workers, rate in results.items():
            if workers:
                print(f"  speed-up with {workers} workers: {rate / results[0]:.2f}x")


if __name__ == "__main__":
    main()
