"""Export models to every format (``onnx`` and each edge format of :data:`oars.export.formats.FORMATS`) and print the
model x format table: ``agreed 1.000`` (the lowest agreement of deploy.yaml's ``parity:`` section), ``refused:
<operator>`` (the format's one-line refusal), ``disagreed: <output> <agreement> < <threshold>`` (the export failed
its parity check) or ``failed: <reason>``.

One piece of code for two callers: ``make demo-edge`` (the demo U-Net and YOLOv3, trained checkpoints) and
tests/export/test_format_matrix.py (one shrunk model per family, which writes the table into docs/deploy.md between
:data:`START` and :data:`END`). A new format appears in both by being registered.

    python tools/format_matrix.py -m U-Net CFG.yaml CKPT.pth [-m NAME CFG CKPT ...] -o OUT_DIR [--formats onnx litert]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import os.path as osp
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from typing import Any

START, END = "<!-- format-matrix:start -->", "<!-- format-matrix:end -->"
REFUSED = re.compile(r"cannot hold operator\(s\) (.+?) of this graph")
CONFIG_PREFIX = re.compile(r"^\S+\.(?:yaml|yml|py): ")
DISAGREED = re.compile(r"on '([^']+)' only (\d\.\d+) \(needed ([\d.]+)")


def format_names() -> list[str]:
    """``onnx`` and every registered edge format, in registry order."""
    from oars.export.formats import FORMATS

    return ["onnx", *FORMATS]


@contextlib.contextmanager
def one_trace() -> Iterator[None]:
    """Within the block, the ONNX graph is traced once and copied for the next exports of the same model: the graph
    does not depend on the format (every format converts it), and tracing is the slow part of an export."""
    import oars.pipelines.export as pipeline

    real = pipeline.export_spec_to_onnx
    cache: dict[str, str] = {}

    def traced_once(spec: Any, image: Any, path: str, options: Any) -> Any:
        if "graph" in cache:
            shutil.copyfile(cache["graph"], path)
            return None
        out = real(spec, image, path, options)
        cache["graph"] = f"{path}.first"
        shutil.copyfile(path, cache["graph"])
        return out

    pipeline.export_spec_to_onnx = traced_once
    try:
        yield
    finally:
        pipeline.export_spec_to_onnx = real
        if "graph" in cache and osp.exists(cache["graph"]):
            os.remove(cache["graph"])


def export_cell(config: Any, checkpoint: str, out_dir: str, fmt: str, task_options: dict | None = None) -> str:
    """Export ``config`` + ``checkpoint`` to ``fmt`` in ``out_dir``; the table cell: ``agreed 1.000`` (edge
    formats: the lowest parity agreement), ``self-check passed`` (onnx: the reference, checked against PyTorch),
    or :func:`error_cell`'s."""
    from oars.errors import OarsError
    from oars.pipelines.export import export_model

    try:
        result = export_model(copy.deepcopy(config), checkpoint, out_dir, fmt=fmt, overwrite=True,
                              task_options=task_options)
    except OarsError as err:
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"  {fmt}: {text}", flush=True)
        return error_cell(text)
    except Exception as err:  # a runtime's own crash (not a user error): one cell, not a lost table
        text = f"{type(err).__name__}: " + (str(err).strip().splitlines() or [""])[0]
        print(f"  {fmt}: {text}", flush=True)
        return f"failed: {text[:120]}"
    if fmt == "onnx":
        return "self-check passed"
    parity = result["format"]["parity"]
    print(f"  {parity['line']}", flush=True)
    measured = [v for v in parity["agreement"].values() if v is not None]
    return f"agreed {min(measured):.3f}" if measured else "agreed (not measured)"


def error_cell(text: str) -> str:
    """The cell of a failed export: ``refused: <operators>`` (the format's refusal), ``disagreed: <output> 0.658 <
    0.99`` (its parity below the threshold) or ``failed: <the message's first 120 characters>``."""
    text = CONFIG_PREFIX.sub("", text)  # the config's path (a temporary folder in the test): not part of the cell
    refused, disagreed = REFUSED.search(text), DISAGREED.search(text)
    if refused:
        return f"refused: {refused.group(1)}"
    if disagreed:
        return f"disagreed: {disagreed.group(1)} {float(disagreed.group(2)):.3f} < {disagreed.group(3)}"
    return f"failed: {text[:120]}"


def export_all(name: str, config: Any, checkpoint: str, out_root: str, formats: Sequence[str],
               task_options: dict | None = None) -> dict[str, str]:
    """Format -> cell for one model (exports in ``out_root/<name>/<format>``, the ONNX graph traced once)."""
    print(f"{name}:", flush=True)
    folder = osp.join(out_root, re.sub(r"[^A-Za-z0-9_.-]+", "_", name))
    with one_trace():
        return {fmt: export_cell(config, checkpoint, osp.join(folder, fmt), fmt, task_options) for fmt in formats}


def markdown_table(rows: dict[str, dict[str, str]], formats: Sequence[str]) -> str:
    """The model x format table (one row per model, ``|``-separated, ending in a newline)."""
    lines = ["| model | " + " | ".join(formats) + " |", "|---|" + "---|" * len(formats)]
    lines += [f"| {name} | " + " | ".join(cells.get(f, "").replace("|", "\\|") for f in formats) + " |"
              for name, cells in rows.items()]
    return "\n".join(lines) + "\n"


def table_in(text: str, path: str = "docs/deploy.md") -> str:
    """The table between :data:`START` and :data:`END` in ``text`` (from the file ``path``: named in the message).

    Raises:
        ValueError: the markers are missing or out of order.
    """
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no {START} ... {END} section")
    return text[start + len(START):end].strip("\n") + "\n"


def with_table(text: str, table: str, path: str = "docs/deploy.md") -> str:
    """``text`` with the section between the markers replaced by ``table``."""
    table_in(text, path)
    start, end = text.find(START) + len(START), text.find(END)
    return text[:start] + "\n" + table + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-m", "--model", nargs=3, action="append", required=True, metavar=("NAME", "CFG", "CKPT"),
                        help="a model: its row name, its config and its checkpoint (repeatable)")
    parser.add_argument("-o", "--out", required=True, help="folder of the exports (one per model and format)")
    parser.add_argument("--formats", nargs="+", default=None, help="default: onnx and every edge format")
    args = parser.parse_args(argv)
    formats = args.formats or format_names()
    unknown = sorted(set(formats) - set(format_names()))
    if unknown:
        parser.error(f"--formats: unknown {unknown}; expected some of {format_names()}")
    for name, cfg, ckpt in args.model:
        for path, what in ((cfg, "config"), (ckpt, "checkpoint")):
            if not osp.isfile(path):
                parser.error(f"--model {name}: {what} {path} not found")
    rows = {name: export_all(name, cfg, ckpt, args.out, formats) for name, cfg, ckpt in args.model}
    print("\n" + markdown_table(rows, formats), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
