"""The core (oars/), the tools (tools/) and the runtime core (oars_deploy outside its predictor plug-ins) name no
task: no code compares with, looks up or passes a task's scope as a string. What a task does is reached through
its registered contract (oars.tasks.TASKS) or its runtime plug-in (deploy.yaml's predictor), so a new task needs
no edit there. Prose is free (a "video file" is a medium, not the task); COCO's ``segmentation`` field (a dict key
or subscript, the RLE/polygon of an annotation) is a format's name, not the task's.

Imports of task packages and module-name probing are tested in tests/oars/test_tasks.py and
tests/test_import_graph.py.
"""

from __future__ import annotations

import ast
import os

import pytest
from demo_utils import ROOT

from oars.tasks import TASKS

RUNTIME = os.path.join("deploy", "python", "oars_deploy")
# the plug-ins own their kinds of output; moved.py lists the old module names that keep importing
RUNTIME_PLUGIN_PARTS = (os.path.join(RUNTIME, "predictors"), os.path.join(RUNTIME, "moved.py"))
FOLDERS = ("oars", "tools", RUNTIME)


def task_name_constants(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, value) of every string constant in ``source`` that equals one of ``names``, other than docstrings,
    dict keys and subscripts (format field names such as COCO's ``segmentation``)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            skip.add(id(first.value))  # a docstring
        if isinstance(node, ast.Dict):
            skip.update(id(k) for k in node.keys if k is not None)
        if isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
            and id(node) not in skip]


def _files() -> list[str]:
    found = []
    for folder in FOLDERS:
        for base, _, names in os.walk(os.path.join(ROOT, folder)):
            found += [os.path.join(base, n) for n in names if n.endswith(".py")]
    return [f for f in found if not os.path.relpath(f, ROOT).startswith(RUNTIME_PLUGIN_PARTS)]


def test_no_task_name_in_the_core_the_tools_and_the_runtime_core():
    names = set(TASKS) | {"oddtask"}
    assert {"detection", "segmentation", "video", "gan"} <= names
    found = [f"{os.path.relpath(path, ROOT)}:{line}: {value!r}" for path in _files()
             for line, value in task_name_constants(open(path, encoding="utf-8").read(), names)]
    why = "task names in task-neutral code (reach the task through oars.tasks or a predictor plug-in)"
    assert found == [], why + ":\n" + "\n".join(found)


@pytest.mark.parametrize(("code", "hits"), [
    ("if cfg.default_scope == 'video':\n    pass\n", [(1, "video")]),
    ("HANDLERS = {'detection': f}\nx = HANDLERS.get('detection')\n", [(2, "detection")]),
    ("run(task='gan')\n", [(1, "gan")]),
    ("ann['segmentation'] = rle\nd = {'segmentation': rle}\n", []),  # COCO's field
    ('"""About segmentation."""\nx = "a video file"\n', []),  # prose
])
def test_the_scanner_finds_what_it_looks_for(code, hits):
    assert task_name_constants(code, {"detection", "segmentation", "video", "gan"}) == hits
