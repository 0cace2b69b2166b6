"""Training-step time of YOLOv3-DarkNet53 through oars versus a bare PyTorch loop, same process.

Both sides train the same ``nn.Module`` on the same batch of 2 images at 320x320:
- oars: ``model.train_step(batch, optim_wrapper)``: the data preprocessor (uint8 -> normalised, padded batch on the
  device), the loss dict parsed and logged, the optimizer wrapper's backward / step / zero_grad;
- bare: ``model(inputs, samples, mode='loss')`` on a pre-normalised tensor, ``sum().backward()``, ``step()``,
  ``zero_grad()``.
Runs alternate (bare, oars, bare, ...) so that drift in machine speed hits both. Prints the medians and the ratio
oars / bare (goal <= 1.05).

    python benchmarks/train_step.py [--repeats 10] [--device cpu|cuda] [--size 320] [--batch 2]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

CONFIG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml")


def make_batch(size: int, batch: int, num_classes: int):
    """``batch`` uint8 images with 3 boxes each, as the data loader delivers them."""
    from mmengine.structures import InstanceData

    from detection.structures import DetDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g))
        xy = torch.rand(3, 2, generator=g) * size * 0.6
        wh = torch.rand(3, 2, generator=g) * size * 0.3 + 16
        s = DetDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1.0, 1.0)))
        s.gt_instances = InstanceData(bboxes=torch.cat([xy, xy + wh], 1),
                                      labels=torch.randint(0, num_classes, (3,), generator=g))
        s.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long))
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=320)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()

    from mmengine.optim import OptimWrapper
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(CONFIG, ["model.data_preprocessor.batch_augments=null"])
    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(copy.deepcopy(cfg.model)).to(args.device).train()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    batch = make_batch(args.size, args.batch, cfg.model.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9, weight_decay=5e-4)
    wrapper = OptimWrapper(opt)

    prepared = model.data_preprocessor(copy.deepcopy(batch), training=True)
    inputs, samples = prepared["inputs"], prepared["data_samples"]

    def bare() -> None:
        losses = model(inputs, samples, mode="loss")
        total = sum(v for k, v in losses.items() if k.startswith("loss"))
        total.backward()
        opt.step()
        opt.zero_grad()

    def oars() -> None:
        model.train_step(batch, wrapper)

    def timed(fn) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - start

    for _ in range(args.warmup):
        bare()
        oars()
    bare_t, oars_t = [], []
    for _ in range(args.repeats):
        bare_t.append(timed(bare))
        oars_t.append(timed(oars))
    b, o = statistics.median(bare_t), statistics.median(oars_t)
    print(f"YOLOv3-DarkNet53, {args.batch}x{args.size}x{args.size}, {args.device}, {args.repeats} steps each "
          f"(torch threads {torch.get_num_threads()})")
    print(f"  bare PyTorch loop : {b * 1000:9.1f} ms/step (median)")
    print(f"  oars train_step   : {o * 1000:9.1f} ms/step (median)")
    print(f"  ratio oars / bare : {o / b:9.3f}  (goal <= 1.05)")


if __name__ == "__main__":
    main()
