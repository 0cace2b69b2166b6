"""Per-file failures while running over a folder: keep going, then say once what could not be done.

``tools/infer.py`` (PyTorch) and the ``deploy/python`` predictor (ONNX Runtime) both run over folders of images.
One unreadable file must not abort the folder with nothing written: each caller writes what it can, records
each file it could not handle here, and ends with :meth:`Failures.raise_if_any`, which raises one
:class:`~oars_deploy.errors.UserError` listing every failure, so the command exits non-zero with the same
wording on both sides.

Example::

    failures = Failures()
    for path in paths:
        try:
            handle(path)
        except UserError as exc:
            failures.add(path, str(exc))
    failures.raise_if_any(total=len(paths))
"""

from __future__ import annotations

import os

from oars_deploy.errors import UserError


class FolderFailuresError(UserError):
    """Some files of a folder could not be handled; the others were written. Lists each file and why."""


class Failures:
    """Collects ``(path, reason)`` pairs while a folder is processed and formats them as one summary."""

    def __init__(self, what: str = "images", verb: str = "could not be read") -> None:
        """Args:
        what: plural noun for the items counted in the summary ("images").
        verb: what went wrong for them ("could not be read").
        """
        self.what = what
        self.verb = verb
        self.items: list[tuple[str, str]] = []

    def add(self, path: str | os.PathLike, reason: str) -> None:
        """Record that ``path`` failed, with the reason (one line is best; newlines are kept indented)."""
        self.items.append((os.fspath(path), str(reason).strip()))

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def summary(self, total: int | None = None) -> str:
        """The failures as one message: ``"N of M images could not be read:"`` then one ``- path: reason``
        line per file (``"N images ..."`` when ``total`` is None). Empty string when nothing failed."""
        if not self.items:
            return ""
        count = f"{len(self.items)} of {total}" if total is not None else str(len(self.items))
        lines = [f"{count} {self.what} {self.verb}:"]
        for path, reason in self.items:
            reason = reason.replace("\n", "\n    ")
            lines.append(f"  - {path}: {reason}")
        return "\n".join(lines)

    def raise_if_any(self, total: int) -> None:
        """Raise :class:`FolderFailuresError` (a ``UserError``) with :meth:`summary` if anything failed.

        Args:
            total: how many items the folder had in all (failed ones included), for "N of M".
        """
        if self.items:
            raise FolderFailuresError(self.summary(total))


# The name the issue uses; one class.
FolderFailures = Failures
