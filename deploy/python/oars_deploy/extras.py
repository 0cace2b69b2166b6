"""Optional extras: import a package that only an extra installs, or fail with one line saying which extra.

Why here: the runtime (``oars-serve`` needs Ray, video models need PyAV) and the training side (``oars.extras``:
torchao, onnx, mlflow, ...) both must turn a missing optional package into one line naming the feature, the package
and the pip command, not ``ModuleNotFoundError`` and a traceback. The mechanism lives once, here, in the runtime
(the training side imports the runtime, never the reverse); each distribution brings its own table of which extra
installs which package, its own install command and its own error class (:class:`Extras`).

The runtime's own table (:data:`RUNTIME_EXTRAS`, deploy/python/pyproject.toml's extras) is what
:func:`require_extra` uses: ``oars-serve needs ray, from the 'serve' extra: pip install 'oars-deploy[serve]' (in an
oars checkout: pip install -e '.[serve]')``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

from oars_deploy.errors import DeployError


def is_installed(module: str) -> bool:
    """Whether ``module`` can be found without importing it (False too for ``sys.modules[name] = None``, how
    tests hide a package, and for a broken install whose spec cannot be read)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Extras:
    """The optional extras of one distribution and the messages that name them.

    Args:
        packages: top-level module -> (the distribution pip installs, the extra that pins it), as the
            distribution's pyproject.toml lists them (``"ray": ("ray[serve,data]", "serve")``).
        install: extra name -> the shell command that installs it (``pip install -e '.[serve]'``).
        error: the user-error class raised for a missing package (printed without a traceback by the CLIs).
        distribution: the name said in "install the version <distribution> pins" (a submodule an older version
            lacks).
    """

    packages: Mapping[str, tuple[str, str]]
    install: Callable[[str], str]
    error: type[Exception]
    distribution: str

    def install_command(self, module: str) -> str:
        """The command that installs ``module``'s extra, or ``pip install <package>`` for a module no extra names.

        Args:
            module: a module path; its top-level package is looked up in :attr:`packages`.
        """
        top = module.split(".")[0]
        return self.install(self.packages[top][1]) if top in self.packages else f"pip install {top}"

    def message(self, module: str, feature: str) -> str:
        """The one line a user sees when ``feature`` cannot import ``module``.

        Args:
            module: the module that is missing (``ray`` or ``ray.serve``: its top-level package is named).
            feature: what needs it, as the user asked for it (``oars-serve``, ``tools/compress.py --method qat``).

        Returns:
            ``"<feature> needs <package>, from the '<extra>' extra: <install command>"``.
        """
        top = module.split(".")[0]
        if top in self.packages:
            return f"{feature} needs {top}, from the '{self.packages[top][1]}' extra: {self.install_command(top)}"
        return f"{feature} needs {top}, which is not installed: {self.install_command(top)}"

    def check(self, modules: Sequence[str], feature: str, error: type[Exception] | None = None) -> None:
        """Raise the user error for the first of ``modules`` whose top-level package is not installed, without
        importing any: for a caller that must set the environment a package reads at import first (Ray reads
        ``RAY_AUTH_MODE`` and Serve's proxy settings once, when imported) but wants to fail before any work.

        Args:
            modules: the packages the feature will import, the main one first (``("ray", "fastapi")``: a missing Ray
                is named as Ray).
            feature: what needs them, as the user asked for it; it starts the message.
            error: the class to raise instead of :attr:`error`.

        Raises:
            error: ``"<feature> needs <package>, from the '<extra>' extra: <install command>"``.
        """
        for module in modules:
            top = module.split(".")[0]
            if not is_installed(top):
                raise (error or self.error)(self.message(top, feature))

    def _same_extra(self, a: str, b: str) -> bool:
        """Whether the top-level packages ``a`` and ``b`` come from the same extra (``fastapi`` with ``ray``)."""
        return a in self.packages and b in self.packages and self.packages[a][1] == self.packages[b][1]

    def require(self, module: str, feature: str, error: type[Exception] | None = None) -> ModuleType:
        """Import ``module`` of an optional extra, or raise the user error saying how to install it.

        Args:
            module: what to import (``ray``, ``torchao.quantization.pt2e.quantize_pt2e``).
            feature: what needs it, as the user asked for it; it starts the message.
            error: the class to raise instead of :attr:`error` (a caller whose own users expect another class).

        Returns:
            The imported module.

        Raises:
            error: the package cannot be imported (or another package of the same extra that it imports, such as
                ``fastapi`` under ``ray.serve``), or the installed version lacks the submodule, or the package is
                installed but fails to import (its own reason is kept). An ImportError naming a package of another
                extra is not caught: that is a broken install of that package, and its own message names it.
        """
        error = error or self.error
        try:
            return importlib.import_module(module)
        except ImportError as err:
            top = module.split(".")[0]
            missing = err.name or module
            missing_top = missing.split(".")[0]
            if missing_top != top:
                if not self._same_extra(missing_top, top):
                    raise
                raise error(self.message(missing_top, feature)) from None
            if missing != top and is_installed(top):  # the package is there, this version lacks the submodule
                raise error(f"{feature} needs {missing}, which the installed {top} lacks; install the version "
                            f"{self.distribution} pins: {self.install_command(top)}") from None
            if err.name is None and is_installed(top):  # found, but its import fails (a missing shared library)
                raise error(f"{feature} needs {top}, which is installed but does not import ({err}); reinstall it: "
                            f"{self.install_command(top)}") from None
            raise error(self.message(top, feature)) from None


# extra of deploy/python/pyproject.toml -> {top-level module: the distribution pip installs}, shaped like the
# pyproject's [project.optional-dependencies]; fastapi / starlette / uvicorn come with ray[serve] (oars-serve's HTTP
# app imports the first two itself), pyarrow / pandas with ray[data] (oars-infer --ray)
RUNTIME_EXTRA_PACKAGES: dict[str, dict[str, str]] = {
    "serve": {name: "ray[serve,data]" for name in ("ray", "fastapi", "starlette", "uvicorn", "pyarrow", "pandas")},
    "video": {"av": "av"},
    "cupy": {"cupy": "cupy-cuda12x"},
    "tensorrt": {"tensorrt": "tensorrt"},
    "openvino": {"openvino": "openvino"},
    "ncnn": {"ncnn": "ncnn"},
    "mnn": {"MNN": "MNN"},
}
# top-level module -> (distribution, extra): the table Extras reads
RUNTIME_PACKAGES: dict[str, tuple[str, str]] = {module: (dist, extra) for extra, modules in
                                                RUNTIME_EXTRA_PACKAGES.items() for module, dist in modules.items()}
# the same packages where the runtime came with oars (a checkout installed with pip install -e .): oars has a
# 'serve' extra of the same pins, PyAV among its base dependencies, and no extra for the GPU packages
OARS_CHECKOUT_INSTALL: dict[str, str] = {
    "serve": "pip install -e '.[serve]'",
    "video": "pip install -e .",
    "cupy": "pip install cupy-cuda12x",
    "tensorrt": "pip install tensorrt cupy-cuda12x",
    "openvino": "pip install -e '.[edge]'",
    "ncnn": "pip install -e '.[edge]'",
    "mnn": "pip install -e '.[edge]'",
}


def runtime_install_command(extra: str) -> str:
    """The command that installs the runtime's ``extra``: ``pip install 'oars-deploy[serve]'``, and what does the
    same in an oars checkout (where oars_deploy came with oars, not as the oars-deploy distribution)."""
    command = f"pip install 'oars-deploy[{extra}]'"
    checkout = OARS_CHECKOUT_INSTALL.get(extra)
    return f"{command} (in an oars checkout: {checkout})" if checkout else command


RUNTIME_EXTRAS = Extras(packages=RUNTIME_PACKAGES, install=runtime_install_command, error=DeployError,
                        distribution="oars-deploy")


def require_extra(module: str, feature: str, error: type[Exception] | None = None) -> ModuleType:
    """Import ``module`` of one of the runtime's extras, or raise :class:`~oars_deploy.errors.DeployError` (or
    ``error``) with one line: ``oars-serve needs ray, from the 'serve' extra: pip install 'oars-deploy[serve]' (in
    an oars checkout: pip install -e '.[serve]')``. See :meth:`Extras.require`."""
    return RUNTIME_EXTRAS.require(module, feature, error)


def check_extra(modules: Sequence[str], feature: str, error: type[Exception] | None = None) -> None:
    """Raise :class:`~oars_deploy.errors.DeployError` (or ``error``) naming the runtime's extra when one of
    ``modules`` is not installed, without importing them (see :meth:`Extras.check`)."""
    RUNTIME_EXTRAS.check(modules, feature, error)
