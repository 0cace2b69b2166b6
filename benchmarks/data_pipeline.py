"""Images per second of the YOLOv3 training pipeline (COCO config's augmentation) with 0 and 2 workers.

Runs the train pipeline of ``configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml`` (load, photometric
distortion, Expand, MinIoURandomCrop, flip, resize to 608, pack) over the generated demo shapes set (COCO format,
written to data/demo_shapes if missing), through mmengine's data loader exactly as training builds it.
The first batch (worker start-up) is timed separately.

    python benchmarks/data_pipeline.py [--batches 30] [--batch-size 8] [--workers 0 2]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args()
    import cv2

    cv2.setNumThreads(0)  # as training sets it (env_cfg.mp_cfg.opencv_num_threads): workers, not threads, scale
    root = ensure_demo_data()
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
