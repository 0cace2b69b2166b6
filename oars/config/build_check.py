"""Build a config's model to validate its values: ``python -m oars.config.check`` does it after the key check.

The key check (:mod:`oars.config.check`) knows names, not values: ``backbone.depth: 19`` is an accepted argument
with an int, and only the ResNet constructor knows 19 is not a depth it has. Building the model once is what
validates such values; the builder's error becomes one line naming the file and the key
(:func:`oars.config.build_errors.describe_build_error`), not a traceback.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from mmengine.config import Config

from oars.config.build_errors import describe_build_error
from oars.config.registry_map import Path_


def build_model_problem(cfg: Config, describe: Callable[[Path_], tuple[str, str]]) -> tuple[str | None, int]:
    """Build ``cfg.model`` on the CPU in the config's scope.

    Args:
        cfg: a loaded config (its keys already checked: an unknown ``type`` is reported better there).
        describe: key path -> (file that set it, key text), :func:`oars.config.check.describer`.

    Returns:
        (None, the number of parameters) when the model builds; (one line naming the key whose value the builder
        refused, 0) otherwise.
    """
    from mmengine.registry import MODELS, DefaultScope

    from oars.tasks import activate

    if not isinstance(cfg.get("model"), dict):
        return None, 0  # nothing to build; the key check reports a missing or malformed model section
    scope = cfg.get("default_scope")
    try:
        activate(scope)
        with DefaultScope.overwrite_default_scope(scope):
            model = MODELS.build(copy.deepcopy(cfg.model))
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - any builder error becomes one line naming the key
        found = describe_build_error(cfg.to_dict(), err, describe)
        if found:
            return found, 0
        return f"{cfg.filename or '<config>'}: model: building the model failed: {type(err).__name__}: {err}", 0
    parameters = getattr(model, "parameters", None)  # a registered model need not be a torch module
    return None, sum(p.numel() for p in parameters()) if callable(parameters) else 0
