"""Optional extras: import a package that only an extra of the ``oars`` distribution installs, or say which extra.

Why one module: a feature that needs ``torchao``, ``torch_pruning``, ``onnx`` or ``mlflow`` must fail with one
line naming the feature, the package and the pip command (``pip install -e '.[compress]'``), not with
``ModuleNotFoundError`` and a traceback; every such import goes through :func:`require_extra`, so the message and
the table of which extra installs which package exist once (the extras themselves: pyproject.toml's
``[project.optional-dependencies]``).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from oars.errors import OarsError

# top-level module -> (the distribution pip installs, the extra of pyproject.toml that pins it)
EXTRA_PACKAGES: dict[str, tuple[str, str]] = {
    "torchao": ("torchao", "compress"),
    "torch_pruning": ("torch-pruning", "compress"),
    "mlflow": ("mlflow-skinny", "track"),
    "wandb": ("wandb", "track"),
    "onnx": ("onnx", "deploy"),
    "onnxruntime": ("onnxruntime", "deploy"),
    "onnxscript": ("onnxscript", "deploy"),
    "ray": ("ray[serve,data]", "serve"),
    "tensorboard": ("tensorboard", "dev"),
}


class MissingExtraError(OarsError):
    """A feature's optional package is not installed; the message names the feature, the package and the pip
    command that installs it."""


def install_command(module: str) -> str:
    """The pip command that installs ``module``'s extra (``pip install -e '.[compress]'``), or the package alone
    for a module no extra names.

    Args:
        module: a module path; its top-level package is looked up in :data:`EXTRA_PACKAGES`.

    Returns:
        One shell command, quoted so that the brackets survive zsh.
    """
    top = module.split(".")[0]
    if top in EXTRA_PACKAGES:
        return f"pip install -e '.[{EXTRA_PACKAGES[top][1]}]'"
    return f"pip install {top}"


def missing_extra_message(module: str, feature: str) -> str:
    """The one line a user sees when ``feature`` cannot import ``module``.

    Args:
        module: the module that is missing (``torchao`` or ``torchao.quantization.pt2e``).
        feature: what needs it, as the user asked for it (``tools/compress.py --method qat``).

    Returns:
        ``"tools/compress.py --method qat needs torchao, from the 'compress' extra: pip install -e '.[compress]'"``.
    """
    top = module.split(".")[0]
    if top in EXTRA_PACKAGES:
        return f"{feature} needs {top}, from the '{EXTRA_PACKAGES[top][1]}' extra: {install_command(top)}"
    return f"{feature} needs {top}, which is not installed: {install_command(top)}"


def is_installed(module: str) -> bool:
    """Whether ``module`` can be found without importing it (False too for ``sys.modules[name] = None``, how
    tests hide a package, and for a broken install whose spec cannot be read)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(module: str, feature: str) -> ModuleType:
    """Import ``module`` of an optional extra, or raise :class:`MissingExtraError` saying how to install it.

    Args:
        module: what to import (``torch_pruning``, ``torchao.quantization.pt2e.quantize_pt2e``).
        feature: what needs it, as the user asked for it; it starts the message.

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the package (or the submodule, in an installed version that lacks it) cannot be
            imported. An ImportError of another package that ``module`` imports is not caught: that is a broken
            install of that package, and its own message names it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = err.name or module
        top = module.split(".")[0]
        if missing.split(".")[0] != top:
            raise
        if missing != top and is_installed(top):  # the package is there, this version lacks the submodule
            raise MissingExtraError(f"{feature} needs {missing}, which the installed {top} lacks; install the "
                                    f"version oars pins: {install_command(top)}") from None
        raise MissingExtraError(missing_extra_message(top, feature)) from None
