"""Writing deploy.yaml: the one writer every exporter (tools/export.py, the GAN export, deploy/cpp/opencv_compat.py)
uses, in the runtime so that a deployment tool needs no training code to write one."""

from __future__ import annotations

from typing import Any

import yaml

from oars_deploy.atomic import atomic_write
from oars_deploy.deploy_config import validate_deploy
from oars_deploy.plugins import PREDICTOR_KEY, predictor_kind


def write_deploy_yaml(path: str, deploy: dict) -> str:
    """Validate ``deploy`` (``oars_deploy.deploy_config.validate_deploy``) and write it to ``path`` atomically.

    Every exporter writes deploy.yaml here, so this is the one place that sets its ``predictor`` key (the runtime
    plug-in that runs the model), from the content (:func:`oars_deploy.plugins.predictor_kind`) unless the
    exporter named one; ``deploy`` gets the key too.

    Raises:
        DeployError: the content is not valid, or no predictor plug-in recognises it.
    """
    if PREDICTOR_KEY not in deploy:
        validate_deploy(deploy, path)  # the content first, so that its errors name the key at fault
        deploy[PREDICTOR_KEY] = predictor_kind(deploy)
    validate_deploy(deploy, path)
    front = {k: deploy[k] for k in ("version", PREDICTOR_KEY) if k in deploy}  # the key a reader looks for first
    return atomic_write(path, yaml.safe_dump(_plain({**front, **deploy}), sort_keys=False, default_flow_style=None,
                                             width=120))


def _plain(value: Any) -> Any:
    """Tuples/numpy scalars -> plain YAML-safe Python values."""
    if isinstance(value, dict):
        return {(k if isinstance(k, (str, int)) else str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value
