"""The Ray Serve application of ``oars-serve``: one deployment whose FastAPI ingress runs the runtime predictor.

Routes (JSON errors are ``{"error": message}``, every failure included: :mod:`oars_deploy.serve.json_errors`):

- ``POST /predict``: the input as the raw body (``image/*`` or ``application/octet-stream``; ``video/*`` for
  video models) or as the multipart/form-data field ``file`` -> the predictor plug-in's result record, the JSON of
  the line ``oars-infer`` writes to results.jsonl for the same file (``input``: the uploaded file name, or the
  ``X-Filename`` header, or ``request``). Requests are batched into the graph's batch dimension
  (``@serve.batch``; one image per call for a static-batch export).
- ``GET /health``: 503 until the model is loaded and has run once, then 200 (no token needed: load balancers).
- ``GET /model``: what the export is (:meth:`ServedModel.summary`). ``GET /metrics``: Prometheus text.

Overload: Ray Serve's ``max_queued_requests`` (``--max-queue``) with a ``backpressure_config`` answers 503 with
``Retry-After`` before a request reaches a replica. :func:`build_app` is the app builder a Ray Serve config file
names (``oars_deploy.serve.app:build_app``, ``args`` = :class:`ServeOptions`), so ``serve run serve.yaml`` and
``serve deploy`` start the same application on an existing cluster.
"""

# no `from __future__ import annotations`: FastAPI reads the route parameters' annotations (Request)
import asyncio
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from ray import serve
from ray.serve.config import BackpressureConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from oars_deploy.serve.json_errors import JsonErrorMiddleware, failure_status
from oars_deploy.serve.metrics import Metrics, metrics_store
from oars_deploy.serve.options import ServeOptions
from oars_deploy.serve.requests import RequestError
from oars_deploy.serve.service import ModelService

IMPORT_PATH = "oars_deploy.serve.app:build_app"
fastapi_app = FastAPI(title="oars-serve", docs_url=None, redoc_url=None, openapi_url=None)
fastapi_app.add_middleware(JsonErrorMiddleware)  # an exception of any route answers JSON, not plain text


@fastapi_app.exception_handler(StarletteHTTPException)
async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
    """FastAPI's own refusals (unknown path 404, wrong method 405) in the application's ``{"error": ...}`` shape."""
    routes = "POST /predict, GET /health, GET /model, GET /metrics"
    return JSONResponse({"error": f"{request.method} {request.url.path}: {err.detail} (routes: {routes})"},
                        status_code=err.status_code, headers=getattr(err, "headers", None))


def keep_replica_grpc_on_loopback() -> bool:
    """On a loopback-only Ray node, make this replica's inter-deployment gRPC server listen on 127.0.0.1.

    Why: Ray Serve 2.60's replica binds that server to ``[::]:0`` whatever the node address
    (``ray/serve/_private/replica.py``, ``_on_initialized``), the one socket of a local ``oars-serve`` that would
    listen beyond this machine. On a node whose address is loopback, nothing outside can use it anyway, so the
    replica module's binding helper is wrapped to use 127.0.0.1; on a real cluster nothing changes. Returns whether
    the wrap is in place (False when Ray's internals differ: then Ray's own binding stays).
    """
    import ray
    from ray.serve._private import replica

    original = getattr(replica, "add_port_to_grpc_server", None)
    if original is None or ray.util.get_node_ip_address() not in ("127.0.0.1", "::1", "localhost"):
        return False
    if getattr(original, "oars_loopback", False):
        return True

    def bind(server, address: str):
        if address.startswith("[::]:"):
            address = "127.0.0.1:" + address.rsplit(":", 1)[1]
        return original(server, address)

    bind.oars_loopback = True
    replica.add_port_to_grpc_server = bind
    return True


def error_response(err: RequestError) -> JSONResponse:
    """``{"error": message}`` with the error's status and headers."""
    return JSONResponse({"error": err.message}, status_code=err.status, headers=err.headers)


@serve.deployment
@serve.ingress(fastapi_app)
class OarsModel:
    """One replica: a :class:`ModelService` loading in the background and the HTTP routes (module docstring)."""

    def __init__(self, options: dict) -> None:
        keep_replica_grpc_on_loopback()
        self.options = ServeOptions.from_dict(options)
        self.service = ModelService(self.options)
        self.local = Metrics()
        try:
            self.store = metrics_store(self.options.app_name)
        except Exception:  # noqa: BLE001  (no Ray actor possible: this replica's own counts)
            self.store = None
        self.batched.set_max_batch_size(self.options.max_batch)
        self.batched.set_batch_wait_timeout_s(self.options.batch_wait_ms / 1000.0)
        self.service.start()

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
    async def batched(self, items: list[tuple[str, Any]]) -> list[dict]:
        """One model call for the requests that arrived together (in a worker thread: the replica keeps
        accepting, decoding and refusing requests meanwhile)."""
        return await asyncio.to_thread(self.service.predict, items)

    def observe(self, status: int, start: float) -> None:
        """Count a /predict answer in the application's metrics."""
        seconds = time.perf_counter() - start
        if self.store is not None:
            self.store.observe.remote(str(status), seconds)
        else:
            self.local.observe(str(status), seconds)

    @fastapi_app.post("/predict")
    async def predict(self, request: Request):
        """See the module docstring."""
        start = time.perf_counter()
        try:
            self.service.check_auth(request.headers.get("authorization"))
            self.service.check_ready()
            body = await self.service.read_body(request.headers.get("content-length"), request.stream())
            name, item = await asyncio.to_thread(self.service.decode, body, request.headers.get("content-type"),
                                                 request.headers.get("x-filename"))
            record = await self.batched((name, item))
        except RequestError as err:
            self.observe(err.status, start)
            return error_response(err)
        except Exception as err:  # noqa: BLE001  (one failed batch must not stop the server)
            status, message, headers = failure_status(err, self.options.retry_after_s)  # a died Ray actor: 503
            self.observe(status, start)
            return JSONResponse({"error": message}, status_code=status, headers=headers)
        self.observe(200, start)
        return JSONResponse(record)

    @fastapi_app.get("/health")
    async def health(self):
        """200 once loaded and warmed, else 503 with the state."""
        status, body = self.service.health()
        headers = {} if status == 200 else {"Retry-After": str(max(1, self.options.retry_after_s))}
        return JSONResponse(body, status_code=status, headers=headers)

    @fastapi_app.get("/model")
    async def model(self, request: Request):
        """The export's summary (predictor, labels, input, batch) and the server's limits."""
        try:
            self.service.check_auth(request.headers.get("authorization"))
            model = self.service.check_ready()
        except RequestError as err:
            return error_response(err)
        limits = {"max_batch": self.options.max_batch, "max_body_mb": self.options.max_body_mb,
                  "max_pixels": self.options.max_pixels, "max_queue": self.options.max_queue}
        return JSONResponse({**model.summary(), "server": limits})

    @fastapi_app.get("/metrics")
    async def metrics(self, request: Request):
        """Prometheus text (request counts and latency per outcome of the whole application)."""
        try:
            self.service.check_auth(request.headers.get("authorization"))
        except RequestError as err:
            return error_response(err)
        extra = {"model_ready": float(self.service.ready)}
        text = await self.store.render.remote(extra) if self.store is not None else self.local.render(extra)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def effective_batch(options: ServeOptions, static_batch: int | None) -> int:
    """The most requests per model call: ``options.max_batch`` for a dynamic batch, 1 for a static one (the graph
    takes exactly its batch; padding single requests up to it would waste the work)."""
    return options.max_batch if static_batch is None else 1


def build_app(args: dict) -> serve.Application:
    """The Ray Serve app builder (config files name ``oars_deploy.serve.app:build_app``).

    Args:
        args: :class:`ServeOptions` fields (``model_dir`` required). The export's deploy.yaml is read here to
            learn its batch: a static-batch graph is served one request per call.

    Returns:
        The bound application (one deployment, ``OarsModel``).
    """
    import os.path as osp

    from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
    from oars_deploy.errors import DeployError

    options = ServeOptions.from_dict(dict(args))
    path = osp.join(options.model_dir, DEPLOY_FILE)
    if not osp.isfile(path):
        raise DeployError(f"model_dir {options.model_dir}: no {DEPLOY_FILE} there (expected an export folder)")
    shape = read_deploy_yaml(path).get("input", {}).get("shape") or [-1]
    static = None if shape[0] in (-1, None) else int(shape[0])
    batch = effective_batch(options, static)
    options = ServeOptions.from_dict({**options.to_dict(), "max_batch": batch})
    deployment = OarsModel.options(
        num_replicas=options.replicas, max_ongoing_requests=2 * batch + 2,
        max_queued_requests=options.max_queue,
        backpressure_config=BackpressureConfig(status_code=503, retry_after_s=float(options.retry_after_s)),
        ray_actor_options={"num_cpus": options.replica_cpus})
    return deployment.bind(options.to_dict())
