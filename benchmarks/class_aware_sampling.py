"""Does class-aware sampling help the rare class? The CACascade R-CNN demo on a long-tailed demo set, trained twice
with the same seed: once with the default sampler (every image once per epoch), once with
``ClassAwareSampler`` (PaddleDetection's image weights: the sum over an image's classes of 1 / the number of
images holding that class, drawn with replacement), then evaluated on the same uniform validation split.

The training split is drawn with class weights 1 : 1 : 0.1 (circle, square, triangle), so triangles are about ten
times rarer than each other class; the validation split stays uniform, so the rare class's AP counts as much as
the others'. Prints the per-class AP (fractions 0-1) of both runs and writes them to ``<work-dir>/comparison.json``.

    python benchmarks/class_aware_sampling.py [--work-dir work_dirs/demo_cacascade] [--epochs N] [--seed 0]
                                              [--data data/demo_shapes_longtail] [--mode paddle|mmdet]

``make demo-cacascade`` runs it with the demo's schedule (20 epochs, about 10 minutes per run on one thread).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

CONFIG = os.path.join(ROOT, "configs/detection/cacascade_rcnn/cacascade_rcnn_r18_fpn_demo_shapes.yaml")
WEIGHTS = (1.0, 1.0, 0.1)


def per_class_ap(metrics_file: str) -> dict[str, float]:
    """``{class: AP}`` from a detection ``metrics.json``'s per-class table (``details``), plus ``mAP``."""
    with open(metrics_file) as f:
        record = json.load(f)
    table = next(t for t in _tables(record) if "AP" in t.get("header", []))
    col = table["header"].index("AP")
    out = {str(row[0]): float(row[col]) for row in table["rows"]}
    out["mAP"] = float(record["metrics"]["coco/bbox_mAP"])
    return out


def _tables(node):
    if isinstance(node, dict):
        if "header" in node and "rows" in node:
            yield node
        for value in node.values():
            yield from _tables(value)
    elif isinstance(node, list):
        for value in node:
            yield from _tables(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", default="work_dirs/demo_cacascade")
    parser.add_argument("--data", default="data/demo_shapes_longtail")
    parser.add_argument("--epochs", type=int, default=None, help="default: the config's 20")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", default="paddle", choices=["paddle", "mmdet"])
    parser.add_argument("--num-train", type=int, default=300, help="training images (default: the demo's 300)")
    parser.add_argument("--num-val", type=int, default=60)
    args = parser.parse_args(argv)

    from oars.data.demo_shapes import generate
    from oars.engine.work_dir import latest_checkpoint
    from oars.errors import OarsError
    from oars.pipelines.evaluate import evaluate
    from oars.pipelines.train import train

    data = generate(args.data, num_train=args.num_train, num_val=args.num_val, train_class_weights=WEIGHTS,
                    seed=args.seed)
    counts = {}
    with open(data["annotations"]["train"]) as f:
        for ann in json.load(f)["annotations"]:
            counts[ann["category_id"]] = counts.get(ann["category_id"], 0) + 1
    print(f"training boxes per class (circle, square, triangle): {[counts.get(i, 0) for i in (1, 2, 3)]}")
    common = [f"{split}.dataset.data_root={args.data}" for split in ("train_dataloader", "val_dataloader",
                                                                    "test_dataloader")]
    common.append(f"randomness.seed={args.seed}")
    if args.epochs is not None:
        common += [f"train_cfg.max_epochs={args.epochs}", f"train_cfg.val_interval={args.epochs}",
                   f"param_scheduler.1.T_max={args.epochs}"]
    runs = {"default": [], "class_aware": ["train_dataloader.sampler={_delete_: true, type: ClassAwareSampler, "
                                           f"mode: {args.mode}}}"]}
    results = {}
    for name, extra in runs.items():
        work_dir = os.path.join(args.work_dir, name)
        overrides = common + extra
        try:
            done = latest_checkpoint(work_dir) if os.path.isdir(work_dir) else None
        except OarsError:  # only damaged checkpoints there: train again
            done = None
        if done is None or not os.path.basename(done).startswith(f"epoch_{args.epochs or 20}"):
            train(CONFIG, overrides, work_dir=work_dir, overwrite=True)
            done = latest_checkpoint(work_dir)
        result = evaluate(CONFIG, done, overrides, work_dir=os.path.join(work_dir, "eval"))
        results[name] = per_class_ap(result["metrics_file"])
    names = ["circle", "square", "triangle", "mAP"]
    print(f"{'sampler':<13}" + "".join(f"{n:>10}" for n in names) + "   (AP, fractions 0-1)")
    for name, aps in results.items():
        print(f"{name:<13}" + "".join(f"{aps.get(n, float('nan')):>10.3f}" for n in names))
    out = os.path.join(args.work_dir, "comparison.json")
    with open(out, "w") as f:
        json.dump({"train_class_weights": WEIGHTS, "seed": args.seed, "mode": args.mode, "results": results}, f,
                  indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
