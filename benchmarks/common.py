"""Helpers shared by the benchmarks: the repository root and the demo data they run on."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_demo_data(root: str = os.path.join(ROOT, "data", "demo_shapes")) -> str:
    """The generated demo shapes set (written once; a matching meta.json skips regeneration)."""
    from oars.data.demo_shapes import generate

    generate(root)
    return root

