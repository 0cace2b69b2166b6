"""A progress bar over videos: tqdm when it is installed, else one line per finished video (on stderr)."""

from __future__ import annotations

import sys


class _Lines:
    """tqdm's ``update`` / ``set_postfix_str`` / ``close`` printing ``desc: n/total postfix`` lines."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, n: int = 1) -> None:
        self.n += n
        print(f"{self.desc}: {self.n}/{self.total} {self.postfix}".rstrip(), file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str) -> object:
    """A bar over ``total`` items with ``update(n)``, ``set_postfix_str(text)`` and ``close()``."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(total, desc)
    return tqdm(total=total, desc=desc, unit="video", file=sys.stderr, dynamic_ncols=True)
