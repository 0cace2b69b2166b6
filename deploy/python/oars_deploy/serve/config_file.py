"""``oars-serve --write-config serve.yaml``: a Ray Serve config file (the format ``serve run`` / ``serve deploy``
read, Ray's ``ServeDeploySchema``) that starts the same application on an existing cluster.

The file names the app builder (``oars_deploy.serve.app:build_app``) and its ``args`` (the
:class:`~oars_deploy.serve.options.ServeOptions`, with absolute paths); the deployment options (replicas,
batching, the overload queue) are set by the builder from those args, so there is one place that decides them.
The bearer token itself is never written, only the path of its file.
"""

from __future__ import annotations

import os.path as osp

import yaml

from oars_deploy.atomic import atomic_write
from oars_deploy.errors import DeployError
from oars_deploy.serve.options import ServeOptions


def serve_config(options: ServeOptions, host: str, port: int) -> dict:
    """The config file's content (a ``ServeDeploySchema`` dict).

    Args:
        options: the application's settings (become the builder's ``args``).
        host / port: the HTTP proxy's address (``http_options``).
    """
    from oars_deploy.serve.app import IMPORT_PATH

    return {"proxy_location": "HeadOnly", "http_options": {"host": host, "port": int(port)},
            "applications": [{"name": options.app_name, "route_prefix": "/", "import_path": IMPORT_PATH,
                              "args": options.to_dict()}]}


def validate_serve_config(config: dict) -> None:
    """Check ``config`` against Ray Serve's own schema (what ``serve deploy`` checks).

    Raises:
        DeployError: with pydantic's message.
    """
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.parse_obj(config)
    except Exception as err:  # noqa: BLE001  (pydantic's ValidationError, whichever pydantic Ray uses)
        raise DeployError(f"the Ray Serve config is not valid: {err}") from None


def write_serve_config(path: str, options: ServeOptions, host: str, port: int) -> str:
    """Write the config file (validated first; atomically; an existing file is not replaced).

    Raises:
        DeployError: ``path`` exists already, or the config fails Ray's schema.
    """
    if osp.exists(path):
        raise DeployError(f"--write-config {path}: the file exists already; give a new name (it is not replaced)")
    config = serve_config(options, host, port)
    validate_serve_config(config)
    return atomic_write(path, yaml.safe_dump(config, sort_keys=False))
