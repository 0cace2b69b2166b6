"""Bookkeeping of a generated (never downloaded) demo data set: its ``meta.json`` stamp, reuse and replacement.

Why one helper: every demo generator (``oars.data.demo_shapes``, ``video.demo_data``, ``gan.demo_data``) must
reuse a complete set written with the same parameters and format version (so ``make demo`` does not regenerate
it), replace a set it wrote earlier with other parameters or a half-written one, and refuse to delete files in a
folder it did not write; the generators also share their command line (:func:`generator_main`).
``meta.json`` carries ``generator`` (who wrote it), ``format_version``, ``params`` and ``complete``; it is
written first with ``complete: false`` (which marks a half-written set as the generator's own) and rewritten
with ``complete: true`` at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

META_NAME = 'meta.json'


def generator_main(prog: str, description: str, add_arguments: Callable[[argparse.ArgumentParser], None],
                   run: Callable[[argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """The ``python -m <generator>`` command line every demo generator shares: its flags, then ``run``; a user
    error (a folder holding other files, a bad count) is argparse's one-line error (exit 2), not a traceback.

    Args:
        prog: the command shown in usage lines (``python -m video.demo_data``).
        description: the first line of the generator's docstring.
        add_arguments: adds the generator's flags (also used by ``tools/demo_data.py``).
        run: generates the set of the parsed arguments and prints what was written; raises ``OarsError``.
        argv: the arguments (None: ``sys.argv[1:]``).

    Returns:
        ``run``'s exit status.
    """
    from oars.errors import OarsError

    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except OarsError as err:
        parser.error(str(err))


def run_generator(name: str, generate: Callable[..., dict], *args: object, codec_key: str | None = None) -> dict:
    """Call a demo generator's ``generate(*args)`` for its ``run`` command and print the first line every generator
    prints: what was written and how long it took, or that an identical set was reused.

    Args:
        name: the set's name in the line (``demo_shapes``).
        generate: the generator; returns a dict with ``out_dir`` and ``skipped``.
        args: its arguments.
        codec_key: a key of the result to show in brackets after the time (the video codec).

    Returns:
        ``generate``'s result, for the generator's own detail lines.

    Raises:
        OarsError: bad sizes or counts, or an output folder holding other files (``ValueError`` /
            ``FileExistsError`` of ``generate``, whose messages name them).
    """
    from oars.errors import OarsError

    start = time.perf_counter()
    try:
        res = generate(*args)
    except (ValueError, FileExistsError) as err:
        raise OarsError(str(err)) from err
    if res['skipped']:
        print(f'{name}: {res["out_dir"]} already holds this set (same parameters); nothing written')
    else:
        extra = f' ({res[codec_key]})' if codec_key else ''
        print(f'{name}: wrote {res["out_dir"]} in {time.perf_counter() - start:.2f} s{extra}')
    return res


def check_int_arg(owner: str, key: str, value: object, low: int) -> int:
    """``value`` as an int if it is an integer (not a bool) ``>= low``; else ``ValueError`` naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f'{owner}: {key} must be an integer >= {low}, got {value!r}')
    return int(value)


def count_files(folder: Path, pattern: str) -> int:
    """Number of files in ``folder`` matching ``pattern`` (0 when the folder is missing)."""
    return len(list(folder.glob(pattern))) if folder.is_dir() else 0


class GeneratedSet:
    """The ``meta.json`` protocol of one generated set under ``root``.

    Args:
        root: output folder.
        generator: the name the generator writes into meta.json (``oars.data.demo_gan``) and checks there.
        format_version: bump it when the generated content changes, so old sets are regenerated.
        params: the generation parameters (JSON-serialisable); a set with other ones is replaced.
        owned: every path the generator writes (files or folders), the only ones ever deleted; ``meta.json`` is
            always included.
        owned_hint: how the owned paths are named in the refusal message (``'images/, labels/ and meta.json'``).
    """

    def __init__(self, root: str | Path, generator: str, format_version: int, params: dict,
                 owned: Sequence[Path], owned_hint: str) -> None:
        self.root = Path(root)
        self.generator = generator
        self.format_version = int(format_version)
        self.params = dict(params)
        self.owned = [self.root / META_NAME, *owned]
        self.owned_hint = owned_hint
        self._meta: dict = {}

    @property
    def meta_path(self) -> Path:
        return self.root / META_NAME

    def read_meta(self) -> dict | None:
        """The meta.json this generator wrote under ``root``, or None (absent, unreadable or another writer's)."""
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) and meta.get('generator') == self.generator else None

    def reusable_meta(self, **must_match: object) -> dict | None:
        """The existing meta.json when it describes a complete set of this format version and these parameters
        (and every ``must_match`` key equals its value there), else None. The caller still checks the files."""
        meta = self.read_meta()
        if meta is None or not meta.get('complete') or meta.get('params') != self.params:
            return None
        if meta.get('format_version') != self.format_version:
            return None
        if any(meta.get(k) != v for k, v in must_match.items()):
            return None
        return meta

    def begin(self, overwrite: bool, **meta_fields: object) -> None:
        """Make ``root`` ready for a fresh set: refuse a non-empty folder without this generator's meta.json
        (unless ``overwrite``), delete the owned paths, and write meta.json with ``complete: false``.

        Raises ``FileExistsError`` naming the folder for a foreign, non-empty one.
        """
        owner = self.generator.rsplit('.', 1)[-1]
        if self.read_meta() is None and self.root.is_dir() and any(self.root.iterdir()) and not overwrite:
            raise FileExistsError(
                f'{owner}.generate: {self.root} is not empty and has no meta.json written by {self.generator}; '
                f'choose another output directory or pass overwrite=True (--overwrite) to replace '
                f'{self.owned_hint} there')
        for path in self.owned:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        self.root.mkdir(parents=True, exist_ok=True)
        self._meta = {'generator': self.generator, 'format_version': self.format_version, 'params': self.params,
                      **meta_fields, 'complete': False}
        self._write()

    def finish(self, **meta_fields: object) -> dict:
        """Mark the set complete (adding ``meta_fields``); returns the written meta."""
        self._meta.update(meta_fields, complete=True)
        self._write()
        return dict(self._meta)

    def _write(self) -> None:
        self.meta_path.write_text(json.dumps(self._meta, indent=2))
