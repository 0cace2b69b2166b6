"""A converter's own virtual environment, created on first use under a cache folder and reused afterwards.

Why: some converters pin packages the main environment must not get (onnx2tf pins TensorFlow 2.19, NumPy 1.26,
onnx 1.19 and onnxruntime 1.23; ultralytics' users saw such installs break their environment, ultralytics#13869,
#20728). As ultralytics' isolated export does, the converter lives in a venv of its own and runs as a subprocess
with an argument list: ``pip install oars`` never pulls TensorFlow and the main environment's packages never change.

How a venv is made safe to reuse:

- its folder is ``<cache>/venvs/<name>-<hash of the pinned requirements and the Python version>`` (the cache is
  ``$OARS_CACHE``, default ``~/.cache/oars``): new pins make a new venv, an old one is never upgraded in place;
- ``python -m venv`` (this interpreter's base Python) + ``pip install`` of the pinned requirements, then a marker
  file written last: a folder without the marker (an interrupted or failed build) is removed and built again;
- a file lock (``fcntl.flock`` on ``<folder>.lock``) so that two exports at once build it once: the second waits
  and then finds the marker.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from oars.export.errors import ExportError

CACHE_ENV = "OARS_CACHE"
MARKER = "oars-env-ready.txt"
BUILD_TIMEOUT_S = 1800  # TensorFlow alone is ~600 MB to download and unpack
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cache_root() -> str:
    """``$OARS_CACHE``, else ``~/.cache/oars``: where converter venvs live (``venvs/`` below it)."""
    return osp.expanduser(os.environ.get(CACHE_ENV) or osp.join("~", ".cache", "oars"))


@dataclass(frozen=True)
class IsolatedEnv:
    """A venv named ``name`` holding exactly ``requirements`` (pinned ``package==version`` lines), used by
    ``feature`` (the words that start every message: ``--format litert``); ``python_versions``: the (major, minor)
    versions whose wheels the pins have (another interpreter is refused before anything is downloaded)."""

    name: str
    requirements: tuple[str, ...]
    feature: str
    python_versions: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> str:
        """12 hex digits of the requirements and the interpreter version: a new pin gives a new folder."""
        text = "\n".join([*sorted(self.requirements), f"python{sys.version_info[0]}.{sys.version_info[1]}"])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def path(self) -> str:
        """``<cache>/venvs/<name>-<key>``."""
        return osp.join(cache_root(), "venvs", f"{self.name}-{self.key}")

    @property
    def python(self) -> str:
        """The venv's interpreter."""
        return osp.join(self.path, "bin", "python")

    def ready(self) -> bool:
        """Whether the venv was built to the end (its marker exists) and its interpreter is there."""
        return osp.isfile(osp.join(self.path, MARKER)) and osp.isfile(self.python)

    def check_python(self) -> None:
        """Refuse an interpreter the pinned wheels do not exist for (one line saying which versions do).

        Raises:
            ExportError: ``--format litert: its converter pins tensorflow==2.19.0, whose wheels exist for Python
                3.9-3.12 only; this is Python 3.13 ...``.
        """
        here = sys.version_info[:2]
        if self.python_versions and here not in self.python_versions:
            known = ", ".join(f"{a}.{b}" for a, b in self.python_versions)
            raise ExportError(f"{self.feature}: its converter environment pins {', '.join(self.requirements[:2])}, "
                              f"whose wheels exist for Python {known} only; this is Python {here[0]}.{here[1]} "
                              f"({sys.executable}): run the export from a Python {known} environment")

    def ensure(self) -> str:
        """The venv's interpreter, building the venv first when it is missing or half-made (under the lock).

        Raises:
            ExportError: the interpreter is not one the pins support, or ``python -m venv`` / ``pip install`` failed
                (their last error line, the folder and the cause to look at); the half-made folder is removed.
        """
        self.check_python()
        if self.ready():
            return self.python
        os.makedirs(osp.dirname(self.path), exist_ok=True)
        with open(f"{self.path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another export building it: wait, then find the marker
            try:
                if not self.ready():
                    self._build()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return self.python

    def _build(self) -> None:
        """``python -m venv`` + ``pip install`` the requirements, then the marker; a failure removes the folder."""
        shutil.rmtree(self.path, ignore_errors=True)  # a half-made venv is rebuilt, never used
        print(f"{self.feature}: creating its converter environment {self.path} (once; "
              f"pip install {' '.join(self.requirements)})", flush=True)
        try:
            self._step([base_python(), "-m", "venv", *([] if self.requirements else ["--without-pip"]), self.path],
                       "python -m venv")
            if self.requirements:
                self._step([self.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q",
                            *self.requirements], "pip install")
            with open(osp.join(self.path, MARKER), "w") as f:
                f.write("\n".join(self.requirements) + "\n")
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def _step(self, argv: list[str], what: str) -> None:
        """Run one build step; its failure is one message with its last error line."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ExportError(f"{self.feature}: building its converter environment {self.path} failed: {what} did "
                              f"not finish within {BUILD_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise ExportError(f"{self.feature}: building its converter environment {self.path} failed ({what} exit "
                              f"{done.returncode}): {last_error_line(done.stderr + done.stdout)} (pip needs the "
                              "package index; the folder was removed, the next export tries again)")

    def run(self, args: Sequence[str], cwd: str, timeout_s: float) -> subprocess.CompletedProcess:
        """``<venv python> args`` in ``cwd`` (building the venv first); its exit code and captured output.

        Raises:
            ExportError: building failed (see :meth:`ensure`) or the command ran past ``timeout_s``.
        """
        python = self.ensure()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONNOUSERSITE="1")  # only the venv's packages; TensorFlow quiet
        try:
            return subprocess.run([python, *args], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ExportError(f"{self.feature}: the converter did not finish within {timeout_s:g} s") from None


def base_python() -> str:
    """The interpreter a venv is made from: this one's base Python (``sys._base_executable`` in a venv), so the new
    venv does not inherit this environment's packages."""
    return getattr(sys, "_base_executable", None) or sys.executable


def last_error_line(text: str) -> str:
    """The last line of ``text`` that says ERROR / Error / error (colour codes removed), else its last line."""
    lines = [ANSI.sub("", ln).strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["(no output)"])[-1][:1000]
