"""``oars-serve`` under load on the loopback interface: throughput, latency percentiles and failures of POST /predict
for U-Net and YOLOv3 (their demo configs at demo size, random weights, dynamic-batch exports), with 1 / 4 / 16
concurrent clients sending a fixed number of requests each round, batching on (``--max-batch 8``) and off
(``--max-batch 1``); and the ratio of the server's images/s to the in-process predictor's (the same runtime
predictor called in a loop, one image per call, no HTTP).

    python benchmarks/serve_load.py [--models unet yolov3] [--clients 1 4 16] [--requests 64] [--batch-wait-ms 5]

One local Ray instance (loopback only) holds every application (one per model and batching setting, each under its
own route prefix, built by the same app builder as ``oars-serve``). Exports are written once under
work_dirs/serve_load/ (tools/export.py --dynamic, with its ONNX Runtime self-check). Bounded: ``--requests`` per
round, 60 s HTTP timeout per request.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402

MODELS = {"unet": ("U-Net", "configs/segmentation/unet/unet_demo_shapes.yaml"),
          "yolov3": ("YOLOv3-DarkNet53", "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")}
OUT = os.path.join(ROOT, "work_dirs", "serve_load")


def export_model(key: str) -> str:
    """The model's export folder (made once: random-weight checkpoint, then tools/export.py --dynamic)."""
    folder = os.path.join(OUT, key)
    if os.path.isfile(os.path.join(folder, "deploy.yaml")):
        return folder
    import torch
    from mmengine.registry import MODELS as ROOT_MODELS
    from mmengine.registry import DefaultScope

    from oars.config import load_config
    from tools.export import main as export_main

    cfg_path = os.path.join(ROOT, MODELS[key][1])
    cfg = load_config(cfg_path)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = ROOT_MODELS.build(copy.deepcopy(cfg.model))
    os.makedirs(OUT, exist_ok=True)
    ckpt = os.path.join(OUT, f"{key}.pth")
    classes = [f"class{i}" for i in range(cfg.model.num_classes)]
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, ckpt)
    export_main(["-c", cfg_path, "-w", ckpt, "--dynamic", "--output-dir", folder])
    return folder


def image_bytes(folder: str) -> tuple[bytes, np.ndarray]:
    """A random PNG at the export's input size (and the decoded image)."""
    import yaml

    with open(os.path.join(folder, "deploy.yaml")) as f:
        h, w = yaml.safe_load(f)["input"]["shape"][2:]
    img = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return cv2.imencode(".png", img)[1].tobytes(), img


def in_process_rate(folder: str, img: np.ndarray, runs: int) -> float:
    """Images/s of the runtime predictor called in a loop, one image per call (after 3 warm-up calls)."""
    from oars_deploy.serve.models import load_served

    model = load_served(folder)
    for _ in range(3):
        model.record("x.png", img, model.predict([img])[0])
    t0 = time.perf_counter()
    for _ in range(runs):
        model.record("x.png", img, model.predict([img])[0])
    return runs / (time.perf_counter() - t0)


def load_round(port: int, prefix: str, data: bytes, clients: int, requests: int) -> dict:
    """``requests`` POSTs of ``data`` to ``prefix``/predict from ``clients`` threads (one keep-alive connection
    each): throughput and latency percentiles of the successes, and the failures."""
    per = [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]

    def client(n: int) -> list[tuple[int, float]]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            try:
                conn.request("POST", f"{prefix}/predict", body=data, headers={"Content-Type": "image/png"})
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            out.append((status, time.perf_counter() - t0))
        conn.close()
        return out

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        answers = [a for part in pool.map(client, per) for a in part]
    wall = time.perf_counter() - t0
    ok = np.array([s for st, s in answers if st == 200]) * 1000.0
    pct = np.percentile(ok, [50, 95, 99]) if ok.size else [float("nan")] * 3
    return {"rps": ok.size / wall, "p50": pct[0], "p95": pct[1], "p99": pct[2],
            "failures": sum(1 for st, _ in answers if st != 200)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--requests", type=int, default=64, help="requests per round (default 64)")
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--port", type=int, default=8911)
    args = parser.parse_args(argv)

    folders = {key: export_model(key) for key in args.models}
    from oars_deploy.serve.cli import set_ray_environment, wait_healthy

    set_ray_environment()  # loopback-only Ray with oars-serve's settings, before Ray is imported
    import ray
    from ray import serve

    from oars_deploy.serve.app import build_app

    ray.init(address="local", include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    rows = []
    try:
        for key, folder in folders.items():
            data, img = image_bytes(folder)
            base = in_process_rate(folder, img, runs=max(16, args.requests // 2))
            for batch in (8, 1):
                name = f"{key}_b{batch}"
                serve.run(build_app({"model_dir": folder, "max_batch": batch, "batch_wait_ms": args.batch_wait_ms,
                                     "max_queue": 256, "app_name": name, "replica_cpus": 1.0}),
                          name=name, route_prefix=f"/{name}", blocking=False)
                wait_healthy(f"http://127.0.0.1:{args.port}/{name}/health", 300)
                load_round(args.port, f"/{name}", data, 4, 8)  # warm the connections and the proxy
                for clients in args.clients:
                    r = load_round(args.port, f"/{name}", data, clients, args.requests)
                    rows.append((MODELS[key][0], "on" if batch > 1 else "off", clients, r, base))
                    print(f"{MODELS[key][0]:<18} batching {'on ' if batch > 1 else 'off'} clients {clients:>2}: "
                          f"{r['rps']:.1f} req/s", flush=True)
                serve.delete(name)
    finally:
        serve.shutdown()
        ray.shutdown()
    print(f"\n{args.requests} requests per round, loopback, {os.cpu_count()} CPUs; in-process = the runtime "
          "predictor in a loop, one image per call")
    print("| model | batching | clients | req/s | p50 ms | p95 ms | p99 ms | failures | in-process img/s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, batching, clients, r, base in rows:
        print(f"| {model} | {batching} | {clients} | {r['rps']:.1f} | {r['p50']:.1f} | {r['p95']:.1f} | "
              f"{r['p99']:.1f} | {r['failures']} | {base:.1f} | {r['rps'] / base:.2f} |")


if __name__ == "__main__":
    main()
