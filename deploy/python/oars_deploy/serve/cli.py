"""``oars-serve``: an exported model behind HTTP, on a local Ray Serve instance.

    oars-serve --model-dir EXPORT_DIR [--host 127.0.0.1] [--port 8000] [--replicas N] [--max-batch B]
               [--batch-wait-ms W] [--token-file F] [--max-body-mb M] [--max-pixels P] [--max-queue Q]
    oars-serve --model-dir EXPORT_DIR [...] --write-config serve.yaml     # for `serve run` / `serve deploy`

Starts a Ray instance of its own on this machine (every Ray process listening on the loopback interface only, no
dashboard, a few CPUs), then the application of :mod:`oars_deploy.serve.app` (POST /predict, GET /health, /model,
/metrics) on ``--host``:``--port`` (127.0.0.1 unless told otherwise), waits until /health answers 200 and serves
until Ctrl-C. ``--write-config`` instead writes a Ray Serve config file naming the app builder with these
settings, which ``serve run serve.yaml`` or ``serve deploy serve.yaml`` start on an existing cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

from oars_deploy.backends import BACKENDS
from oars_deploy.errors import DeployError, run_cli
from oars_deploy.extras import check_extra
from oars_deploy.serve.json_errors import PROXY_CALLBACK, RETRY_AFTER_ENV
from oars_deploy.serve.options import ServeOptions

LOOPBACK = ("127.0.0.1", "localhost", "::1")
START_TIMEOUT_S = 300.0
# Ports the local Ray instance binds itself whatever we ask (its dashboard agent's HTTP port is fixed): an HTTP
# server asked to listen there would lose the race to Ray's own process.
RAY_FIXED_PORTS = {52365: "Ray's dashboard agent"}
# what the server imports from the serve extra (ray first: a missing Ray is named as such, not as its fastapi)
SERVE_MODULES = ("ray", "fastapi", "starlette", "uvicorn")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (defaults: :class:`ServeOptions`)."""
    d = ServeOptions(model_dir="")
    p = argparse.ArgumentParser(prog="oars-serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True, help="export folder (deploy.yaml + model.onnx), read at start only")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--replicas", type=int, default=d.replicas, help="model replicas (default %(default)s)")
    p.add_argument("--max-batch", type=int, default=d.max_batch,
                   help="most requests per model call (default %(default)s; 1 for a static-batch export)")
    p.add_argument("--batch-wait-ms", type=float, default=d.batch_wait_ms,
                   help="how long a batch may wait to fill (default %(default)s ms)")
    p.add_argument("--token-file", default=None, help="file whose first line is the bearer token clients must send")
    p.add_argument("--max-body-mb", type=float, default=d.max_body_mb, help="largest body (default %(default)s MiB)")
    p.add_argument("--max-pixels", type=int, default=d.max_pixels, help="largest image, width*height (default "
                                                                          "%(default)s)")
    p.add_argument("--max-queue", type=int, default=d.max_queue,
                   help="requests waiting for a replica before 503 + Retry-After (default %(default)s)")
    p.add_argument("--topk", type=int, default=d.topk, help="video / feature models: classes per record")
    p.add_argument("--device", default=d.device, help="cpu or cuda")
    p.add_argument("--backend", default=d.backend, choices=BACKENDS,
                   help="what runs the export: onnxruntime, ort (model.ort), openvino (model.xml) or tensorrt")
    p.add_argument("--replica-cpus", type=float, default=d.replica_cpus, help="Ray CPUs per replica")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray instance (default: replicas "
                                                               "x replica CPUs, at least 1)")
    p.add_argument("--app-name", default=d.app_name, help="Ray Serve application name")
    p.add_argument("--write-config", default=None, metavar="SERVE_YAML",
                   help="write a Ray Serve config file for these settings and exit (nothing is started)")
    return p.parse_args(argv)


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """:class:`ServeOptions` of the command line (the model folder made absolute: replicas run elsewhere)."""
    return ServeOptions(model_dir=osp.abspath(args.model_dir), device=args.device, backend=args.backend,
                        replicas=args.replicas, replica_cpus=args.replica_cpus, max_batch=args.max_batch,
                        batch_wait_ms=args.batch_wait_ms,
                        token_file=osp.abspath(args.token_file) if args.token_file else None,
                        max_body_mb=args.max_body_mb, max_pixels=args.max_pixels, max_queue=args.max_queue,
                        topk=args.topk, app_name=args.app_name)


def check_model_dir(options: ServeOptions) -> int | None:
    """Refuse a folder the server could not serve before Ray starts; returns the export's static batch (None:
    dynamic). Also reads the token file once, so a bad one is told now, and warns on stderr when other users can
    read it (:func:`~oars_deploy.serve.service.token_file_warning`; the server still starts)."""
    from oars_deploy.serve.models import served_class
    from oars_deploy.serve.service import read_token, token_file_warning

    deploy, _ = served_class(options.model_dir)
    if options.token_file:
        read_token(options.token_file)
        warning = token_file_warning(options.token_file)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    first = deploy["input"]["shape"][0]
    return None if first in (-1, None) else int(first)


def wait_healthy(url: str, timeout_s: float) -> dict:
    """Poll ``url`` (GET /health) until 200; the last body. Raises DeployError on a failed load or a timeout."""
    deadline, last = time.monotonic() + timeout_s, "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            body = err.read().decode("utf-8", "replace")
            last = f"HTTP {err.code}: {body}"
            if err.code == 503 and '"failed"' in body:
                raise DeployError(f"the model did not load: {json.loads(body).get('error')}") from None
        except (urllib.error.URLError, OSError) as err:
            last = str(err)
        time.sleep(0.2)
    raise DeployError(f"{url} did not answer 200 within {timeout_s:.0f} s (last: {last})")


def check_port(host: str, port: int) -> None:
    """Refuse an HTTP port the server could not listen on, before Ray starts (seconds, not a Ray traceback):
    outside 1..65535, one the local Ray instance takes for itself, or one another program holds now."""
    if not 0 < port < 65536:
        raise DeployError(f"--port {port}: expected a TCP port in 1..65535")
    if port in RAY_FIXED_PORTS:
        raise DeployError(f"--port {port} is the port {RAY_FIXED_PORTS[port]} listens on in the local Ray instance "
                          "oars-serve starts: choose another --port")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            raise DeployError(f"cannot listen on {host}:{port} ({err.strerror or err}): another program holds the "
                              "port or the address is not this machine's; choose another --port or --host") from None


def set_ray_environment() -> None:
    """The Ray settings every local Serve instance of oars starts with (``oars-serve``, benchmarks/serve_load.py),
    before Ray is first imported (it reads them then); a value the user set wins.

    - ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: Ray's node address is loopback, so none of its sockets listens beyond
      this machine; ``RAY_USAGE_STATS_ENABLED=0``: no telemetry.
    - ``RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S=30``: Serve's controller marks an HTTP proxy that has not answered its
      ready check within 5 s (its default) unhealthy and kills it, and the start fails with ``ActorDiedError``.
      The test suite's benchmark smoke run failed that way twice while two test suites shared two cores (the proxy
      "killed by ray.kill ... before it started running") and passed alone; the slow start is the likely cause,
      not proven, and the longer check costs nothing when the proxy is quick.
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "30")


def start(options: ServeOptions, host: str, port: int, num_cpus: int | None) -> float:
    """Start the local Ray instance (loopback only) and the application; returns the seconds until healthy."""
    t0 = time.perf_counter()
    set_ray_environment()
    # the HTTP proxy answers JSON 503 + Retry-After while the app starts and JSON for its own failures
    # (json_errors.py); Ray's workers inherit this environment
    os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", PROXY_CALLBACK)
    os.environ[RETRY_AFTER_ENV] = str(options.retry_after_s)
    import ray
    from ray import serve

    from oars_deploy.serve.app import build_app

    cpus = num_cpus or max(1, int(round(options.replicas * options.replica_cpus + 0.49)))
    ray.init(address="local", include_dashboard=False, num_cpus=cpus, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    try:
        serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly")
    except Exception as err:  # Ray wraps the proxy's bind failure in a RayTaskError of the ProxyActor
        if "Failed to bind" not in str(err):
            raise
        ray.shutdown()
        raise DeployError(f"cannot listen on {host}:{port}: the port was taken while Ray started (another program "
                          "or one of Ray's own processes); choose another --port") from None
    serve.run(build_app(options.to_dict()), name=options.app_name, route_prefix="/", blocking=False)
    url_host = f"[{host}]" if ":" in host else ("127.0.0.1" if host in ("0.0.0.0", "::") else host)
    wait_healthy(f"http://{url_host}:{port}/health", START_TIMEOUT_S)
    return time.perf_counter() - t0


def ray_address() -> str:
    """The running local Ray instance's GCS address (other drivers, e.g. ``oars-infer --ray``, may join it)."""
    import ray

    return ray.get_runtime_context().gcs_address


def run(argv: list[str] | None = None) -> None:
    """The command with user errors raised (:func:`main` prints them)."""
    from oars_deploy.serve.config_file import write_serve_config

    args = parse_args(argv)
    # before anything imports the app (oars_deploy.serve.app imports Ray at its top); checked, not imported: Ray
    # reads the environment start() sets when it is first imported
    check_extra(SERVE_MODULES, "oars-serve")
    options = options_from_args(args)
    static = check_model_dir(options)
    if static is not None:
        print(f"oars-serve: the export has a static batch of {static}: requests are served one per model call "
              f"(--max-batch {args.max_batch} ignored; export with a dynamic batch to batch requests)")
    if args.write_config:
        path = write_serve_config(args.write_config, options, args.host, args.port)
        print(f"wrote {path}: start it with `serve run {path}` (a local Ray) or `serve deploy {path}` (a running "
              "cluster)")
        return
    check_port(args.host, args.port)
    if args.host not in LOOPBACK:
        print(f"oars-serve: listening on {args.host}, reachable from other machines"
              + ("" if options.token_file else " WITHOUT a token (--token-file)"), file=sys.stderr)
    seconds = start(options, args.host, args.port, args.num_cpus)
    print(f"oars-serve: ready on http://{args.host}:{args.port} (POST /predict, GET /health /model /metrics); "
          f"startup {seconds:.1f} s; Ray address {ray_address()} (oars-infer --ray --ray-address)", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


def main(argv: list[str] | None = None) -> None:
    """The ``oars-serve`` console script: user errors printed without a traceback, exit status 2."""
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
