"""Does the YOLOv3 demo config still learn when pointed at photos whose objects are large?

The demo config (configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml) is tuned to the 128-px demo shapes:
its anchors sit on the stride-8/16 maps and the stride-32 map keeps one 100-px anchor. A user's own photos usually
show a few large objects. There is no photo set on this offline machine, so this benchmark draws the nearest thing
with the demo's own generator: 1-2 shapes per image at twice the demo's size, 256-px images (the demo pipeline
resizes them to 128, as it would a photo), boxes of about 25-110 px at 128 where the demo's are 7-52. The config is
then pointed at that set the usual way (``-o *.dataset.data_root=...``) and trained on its unchanged schedule, with
the anchors as shipped and/or refitted by the command the config's comment gives (``tools/optimize_anchors.py``;
``--num 9`` refits nine anchors on the standard YOLOv3 masks, three per level), and its COCO mAP on the validation
images is printed.

    python benchmarks/large_objects.py [--anchors fitted|fitted9|shipped|all] [--epochs N] [--work-dir DIR]
                                       [--num-train 300] [--num-val 60] [--seed 0]

Training is the demo's (about 8 minutes per run on one thread); ``--epochs`` shortens it for a quick look.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

CONFIG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
SIZE, OBJECT_SCALE, MAX_OBJECTS = 256, 2.0, 2


def box_sizes(root: str, split: str) -> str:
    """``min / median / max`` of the boxes' longer sides once resized to the pipeline's 128x128."""
    anns = json.load(open(os.path.join(root, "annotations", f"instances_{split}.json")))["annotations"]
    sides = np.array([max(a["bbox"][2:]) * 128 / SIZE for a in anns])
    return f"{sides.min():.0f} / {np.median(sides):.0f} / {sides.max():.0f} px"


def data_overrides(root: str) -> list[str]:
    """Point every dataloader of the demo config at ``root`` (the COCO layout of the demo shapes)."""
    return [f"{split}.dataset.data_root={root}" for split in ("train_dataloader", "val_dataloader", "test_dataloader")]


def fitted_anchors(root: str, num: int | None) -> list[str]:
    """Run tools/optimize_anchors.py on the config pointed at ``root`` (``--num num`` when given); returns the
    ``-o`` overrides it prints (the anchors, and the masks when the count changed)."""
    extra = ["--num", str(num)] if num else []
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "optimize_anchors.py"), "-c", CONFIG, *extra,
                           "-o", *data_overrides(root)], capture_output=True, text=True, cwd=ROOT, check=True)
    print(proc.stdout)
    overrides = []
    for line in proc.stdout.splitlines():
        if line.strip().startswith("-o model.bbox_head."):
            key, value = line.strip()[3:].split("=", 1)
            ast.literal_eval(value.strip('"'))  # a list, or this fails loudly
            overrides.append(f"{key}={value.strip(chr(34))}")
    return overrides


def train_and_eval(work: str, overrides: list[str]) -> dict:
    """Train the demo config with ``overrides`` into ``work``, evaluate its last checkpoint; returns metrics.json's
    metrics."""
    tool = os.path.join(ROOT, "tools")
    subprocess.run([sys.executable, os.path.join(tool, "train.py"), "-c", CONFIG, "--work-dir", work, "--overwrite",
                    "-o", *overrides], cwd=ROOT, check=True)
    ckpt = open(os.path.join(work, "last_checkpoint")).read().strip()
    subprocess.run([sys.executable, os.path.join(tool, "eval.py"), "-c", CONFIG, "-w", ckpt, "--work-dir", work,
                    "-o", *overrides], cwd=ROOT, check=True)
    return json.load(open(os.path.join(work, "metrics.json")))["metrics"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--anchors", choices=["fitted", "fitted9", "shipped", "all"], default="fitted")
    parser.add_argument("--epochs", type=int, default=None, help="shorter schedule (default: the config's 24)")
    parser.add_argument("--work-dir", default=os.path.join(ROOT, "work_dirs", "large_objects"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated images")
    parser.add_argument("--num-train", type=int, default=300, help="training images (the demo's 300)")
    parser.add_argument("--num-val", type=int, default=60, help="validation images (the demo's 60)")
    args = parser.parse_args(argv)

    from oars.data.demo_shapes import generate

    root = os.path.join(args.work_dir, "data")
    counts = generate(root, num_train=args.num_train, num_val=args.num_val, size=SIZE, seed=args.seed,
                      object_scale=OBJECT_SCALE, max_objects=MAX_OBJECTS)["num_annotations"]
    print(f"large shapes in {root}: {counts['train']} train / {counts['val']} val boxes, longer side at 128 px "
          f"(min / median / max) {box_sizes(root, 'train')} (the demo shapes: 7 / 32 / 52 px)")
    base = data_overrides(root)
    if args.epochs:
        base += [f"train_cfg.max_epochs={args.epochs}", f"train_cfg.val_interval={args.epochs}",
                 f"param_scheduler.1.T_max={args.epochs}"]
    names = ["shipped", "fitted", "fitted9"] if args.anchors == "all" else [args.anchors]
    results = {}
    for name in names:
        anchors = [] if name == "shipped" else fitted_anchors(root, 9 if name == "fitted9" else None)
        results[name] = train_and_eval(os.path.join(args.work_dir, name), base + anchors)
    print("\nYOLOv3 demo config on the large shapes (validation):")
    for name, metrics in results.items():
        print(f"  anchors {name:<8}: COCO mAP {metrics['coco/bbox_mAP']:.3f}, "
              f"mAP@0.5 {metrics['coco/bbox_mAP_50']:.3f}")


if __name__ == "__main__":
    main()
