"""Optional extras of the ``oars`` distribution: import a package that only an extra installs, or say which extra.

Why this module: a feature that needs ``torchao``, ``torch_pruning``, ``onnx`` or ``mlflow`` must fail with one
line naming the feature, the package and the pip command (``pip install -e '.[compress]'``), not with
``ModuleNotFoundError`` and a traceback; every such import goes through :func:`require_extra`. The mechanism is the
runtime's (:class:`oars_deploy.extras.Extras`, which ``oars-serve`` and the video readers use with the runtime's
own extras); this module brings oars' table (pyproject.toml's ``[project.optional-dependencies]``), its install
command and its error class.
"""

from __future__ import annotations

from types import ModuleType

from oars.errors import OarsError
from oars_deploy.extras import Extras
from oars_deploy.extras import is_installed as is_installed  # re-exported: oars' callers import it from here

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
    "optuna": ("optuna", "tune"),
    "openvino": ("openvino", "edge"),
    "nncf": ("nncf", "edge"),
    "pnnx": ("pnnx", "edge"),
    "ncnn": ("ncnn", "edge"),
    "MNN": ("MNN", "edge"),
}


class MissingExtraError(OarsError):
    """A feature's optional package is not installed; the message names the feature, the package and the pip
    command that installs it."""


def _extra_command(extra: str) -> str:
    """``pip install -e '.[extra]'``, quoted so that the brackets survive zsh (oars is installed from its checkout)."""
    return f"pip install -e '.[{extra}]'"


OARS_EXTRAS = Extras(packages=EXTRA_PACKAGES, install=_extra_command, error=MissingExtraError, distribution="oars")


def install_command(module: str) -> str:
    """The pip command that installs ``module``'s extra (``pip install -e '.[compress]'``), or the package alone
    for a module no extra names.

    Args:
        module: a module path; its top-level package is looked up in :data:`EXTRA_PACKAGES`.

    Returns:
        One shell command, quoted so that the brackets survive zsh.
    """
    return OARS_EXTRAS.install_command(module)


def missing_extra_message(module: str, feature: str) -> str:
    """The one line a user sees when ``feature`` cannot import ``module``.

    Args:
        module: the module that is missing (``torchao`` or ``torchao.quantization.pt2e``).
        feature: what needs it, as the user asked for it (``tools/compress.py --method qat``).

    Returns:
        ``"tools/compress.py --method qat needs torchao, from the 'compress' extra: pip install -e '.[compress]'"``.
    """
    return OARS_EXTRAS.message(module, feature)


def require_extra(module: str, feature: str) -> ModuleType:
    """Import ``module`` of an optional extra, or raise :class:`MissingExtraError` saying how to install it.

    Args:
        module: what to import (``torch_pruning``, ``torchao.quantization.pt2e.quantize_pt2e``).
        feature: what needs it, as the user asked for it; it starts the message.

    Returns:
        The imported module.

    Raises:
        MissingExtraError: the package (or another package of the same extra that it imports, or the submodule,
            in an installed version that lacks it) cannot be imported. An ImportError of a package of another
            extra is not caught: that is a broken install of that package, and its own message names it
            (:meth:`oars_deploy.extras.Extras.require`).
    """
    return OARS_EXTRAS.require(module, feature)
