"""Throughput of the demo U-Net's training data loading from local files, from WebDataset shards on a loopback S3
and from the same images read one object at a time on that S3.

Usage (from the repository root)::

    python benchmarks/data_throughput.py                    # data/demo_shapes (written if missing), 2 workers
    python benchmarks/data_throughput.py --batches 20 --repeats 1 --json out.json --data DIR

The train loader of ``configs/segmentation/unet/unet_demo_shapes.yaml`` (its pipeline: load the image and label
map, random resize and crop to 64 px, flip, photometric distortion, pack; batch 8) is built as training builds it
(``Runner.build_dataloader``) five ways, with ``--workers`` DataLoader workers each:

- ``local``: ``SegDataset`` on the local folder;
- ``local shards``: the shards below written to a local folder (the format's own cost, without the S3);
- ``s3 shards``: ``ShardDataset`` on ``tools/make_shards.py``'s shards of the train split (``--shard-size``), written
  to the loopback S3 beforehand, with ``ShardSamplerHook``'s sampler installed (shuffle buffer ``--shuffle-buffer``;
  each worker reads ahead of its decoding in a background thread, ``prefetch_bytes`` at its default);
- ``s3 shards, no read-ahead``: the same with ``prefetch_bytes: 0`` (each shard streamed when its turn comes: what
  the read-ahead saves);
- ``s3 files``: ``SegDataset`` with ``data_root: s3://…`` on the uploaded folder (two GET requests per sample).

The S3 endpoint is moto's server on 127.0.0.1 (no real S3 server can be installed here), by default in its own
process (``--server process``: ``python -m moto.server``, so it does not hold the GIL of the process the batches
arrive in), or as tests/s3_server.py's ``ThreadedMotoServer`` inside this process (``--server thread``, the earlier
measurements). Either way it serves every request with the same cores the workers decode on, so the S3 figures
include the server's own work, which a remote S3 does elsewhere. Each measure builds the loader,
reads ``--warmup`` batches (worker start-up, the first requests), then times ``--batches`` batches (epochs wrap
around); the loader and its workers are shut down before the next. ``--repeats`` rounds, each side once per round
in a rotated order; reported: the median samples/s of each side and the median of the per-round ratios to
``local`` (goal for shards: >= 0.9).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT, ensure_demo_data  # noqa: E402
from benchmarks.data_scale_cases import load_average  # noqa: E402
from benchmarks.s3_loopback import s3_server_module, s3_server_process  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "segmentation", "unet", "unet_demo_shapes.yaml")
SIDES = ("local", "local shards", "s3 shards", "s3 shards, no read-ahead", "s3 files")
GOAL = {"s3 shards": 0.9}


def demo_config(data_root: str, workers: int, batch_size: int):
    """The demo U-Net config on ``data_root`` with ``workers`` persistent workers and ``batch_size``."""
    from oars.config import load_config

    return load_config(CONFIG, [
        f"train_dataloader.dataset.data_root={data_root}",
        f"train_dataloader.num_workers={workers}",
        f"train_dataloader.persistent_workers={workers > 0}",
        f"train_dataloader.batch_size={batch_size}",
    ])


def loader_configs(cfg, files_url: str, shards_url: str, local_shards: str, options: dict,
                   shuffle_buffer: int) -> dict[str, dict]:
    """The train loader config of each side (``SIDES``): the same pipeline, batch size and workers."""
    local = copy.deepcopy(cfg.train_dataloader.to_dict())
    files = copy.deepcopy(local)
    files["dataset"].update(data_root=files_url, storage_options=dict(options))

    def shards(root: str, storage_options: dict | None, **extra) -> dict:
        out = copy.deepcopy(local)
        out["dataset"] = {"type": "ShardDataset", "shards": root, "pipeline": local["dataset"]["pipeline"],
                          "shuffle_buffer": shuffle_buffer, **extra}
        if storage_options:
            out["dataset"]["storage_options"] = dict(storage_options)
        out["sampler"] = None  # an iterable dataset: ShardSamplerHook's sampler is installed on the built loader
        return out

    return {"local": local, "local shards": shards(local_shards, None), "s3 shards": shards(shards_url, options),
            "s3 shards, no read-ahead": shards(shards_url, options, prefetch_bytes=0), "s3 files": files}


def measure(loader_cfg: dict, warmup: int, batches: int) -> tuple[float, float]:
    """(seconds to the end of the warm-up batches, samples/s over the next ``batches`` batches)."""
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner

    from oars.data.samplers.shard_stream import install_stream_sampler

    with DefaultScope.overwrite_default_scope("segmentation"):
        loader = Runner.build_dataloader(copy.deepcopy(loader_cfg), seed=0)
    install_stream_sampler(loader, 0)  # what ShardSamplerHook does (nothing for a map-style dataset)
    it = iter(loader)

    def next_batch() -> dict:
        nonlocal it
        try:
            return next(it)
        except StopIteration:  # the end of an epoch: the persistent workers go on
            it = iter(loader)
            return next(it)

    start = time.perf_counter()
    for _ in range(warmup):
        next_batch()
    warm = time.perf_counter() - start
    samples, start = 0, time.perf_counter()
    for _ in range(batches):
        samples += len(next_batch()["inputs"])
    rate = samples / (time.perf_counter() - start)
    getattr(it, "_shutdown_workers", lambda: None)()
    return warm, rate


def run(args: argparse.Namespace) -> dict:
    """Start the loopback S3, upload the set and its shards, measure every side ``args.repeats`` times."""
    from oars.data.shards.writer import make_shards, parse_size

    data = os.path.abspath(args.data) if args.data else ensure_demo_data()
    shard_size = parse_size(args.shard_size)
    cfg = demo_config(data, args.workers, args.batch_size)
    rates: dict[str, list[float]] = {s: [] for s in SIDES}
    warm: dict[str, list[float]] = {s: [] for s in SIDES}
    ratios: dict[str, list[float]] = {s: [] for s in SIDES}
    server = s3_server_process if args.server == "process" else s3_server_module().running_s3_server
    with tempfile.TemporaryDirectory(prefix="oars-throughput-") as tmp, server(tmp) as s3:
        files_url = s3.upload(data, "shapes")
        shards_url = f"s3://{s3.bucket}/shards/train"
        index = make_shards(cfg, "train", shards_url, shard_size, storage_options=s3.storage_options, progress=False)
        local_shards = os.path.join(tmp, "shards")
        make_shards(cfg, "train", local_shards, shard_size, progress=False)
        configs = loader_configs(cfg, files_url, shards_url, local_shards, s3.storage_options, args.shuffle_buffer)
        for r in range(args.repeats):
            order = SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]  # rotated: drift hits every side alike
            got = {}
            for side in order:
                w, got[side] = measure(configs[side], args.warmup, args.batches)
                rates[side].append(got[side])
                warm[side].append(w)
            for side in SIDES:
                ratios[side].append(got[side] / got["local"])
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "load": load_average(), "cores": os.cpu_count(),
            "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
            "samples": index["total"], "shards": len(index["shards"]), "shard_size": args.shard_size,
            "workers": args.workers, "batch_size": args.batch_size, "batches": args.batches, "warmup": args.warmup,
            "repeats": args.repeats, "shuffle_buffer": args.shuffle_buffer, "server": args.server,
            "sides": {s: {"samples_per_s": statistics.median(rates[s]), "all_samples_per_s": rates[s],
                          "warmup_s": statistics.median(warm[s]), "ratio": statistics.median(ratios[s])}
                      for s in SIDES}}


def print_table(result: dict) -> None:
    print(f"\ndata_throughput: {result['date']}, {result['machine']}, {result['cores']} cores, {result['load']}")
    print(f"U-Net demo training data: {result['samples']} train samples ({result['shards']} shards of at most "
          f"{result['shard_size']}), batch {result['batch_size']}, {result['workers']} workers, {result['batches']} "
          f"batches after {result['warmup']} warm-up, median of {result['repeats']} rounds; moto's server in "
          f"{'its own process' if result['server'] == 'process' else 'this process (a thread)'}\n")
    print("| data | samples/s | ratio to local | warm-up s |")
    print("|---|---|---|---|")
    for side, row in result["sides"].items():
        goal = f" (goal >= {GOAL[side]})" if side in GOAL else ""
        print(f"| {side} | {row['samples_per_s']:.1f} | {row['ratio']:.2f}{goal} | {row['warmup_s']:.2f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None,
                        help="a demo shapes set (default: data/demo_shapes, written if missing)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of every side")
    parser.add_argument("--batch-size", type=int, default=8, help="the demo config's batch size")
    parser.add_argument("--batches", type=int, default=60, help="timed batches per measure")
    parser.add_argument("--warmup", type=int, default=5, help="batches read before timing (worker start-up)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (each side once per round)")
    parser.add_argument("--shard-size", default="1MB", help="tools/make_shards.py's --shard-size")
    parser.add_argument("--shuffle-buffer", type=int, default=64, help="ShardDataset's shuffle_buffer")
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="moto's S3 server in its own process (default) or in a thread of this one")
    parser.add_argument("--json", default=None, help="also write the results to this json file")
    args = parser.parse_args(argv)
    for flag in ("batch_size", "batches", "repeats", "shuffle_buffer"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
    for flag in ("workers", "warmup"):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag} must be 0 or more, got {getattr(args, flag)}")
    if args.data and not os.path.isdir(os.path.join(args.data, "images", "train")):
        raise SystemExit(f"--data {os.path.abspath(args.data)}: no images/train folder (a demo shapes set: python -m "
                         "oars.data.demo_shapes --out DIR)")
    result = run(args)
    print_table(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
