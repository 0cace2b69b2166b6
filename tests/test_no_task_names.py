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
import re

import pytest
from demo_utils import ROOT

from oars.tasks import TASKS

RUNTIME = os.path.join("deploy", "python", "oars_deploy")
# the plug-ins own their kinds of output
RUNTIME_PLUGIN_PARTS = (os.path.join(RUNTIME, "predictors"),)
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


# what names a task or its kind of model in an identifier; "video" is left out: it is also a medium (a video file,
# VideoWriter), which task-neutral code reads and writes
TASK_WORDS = frozenset({"detection", "detector", "segmentation", "segmenter", "segmentor", "gan", "recognizer",
                        "localizer", "localization"})


def task_words_in_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of every class and function of ``source`` whose name holds a word of :data:`TASK_WORDS`
    (words split at underscores and at lower-to-upper case changes: ``draw_detection``, ``GanModel``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", node.name).lower().split("_")
            if TASK_WORDS & set(words):
                found.append((node.lineno, node.name))
    return found


def test_no_task_word_in_class_or_function_names_of_the_core_the_tools_and_the_runtime_core():
    """The string scan above cannot see ``def draw_detection(...)`` or ``class GanModel``: a task-neutral layer
    that names a task in its code has grown a branch of that task, which belongs in the task or its plug-in."""
    found = [f"{os.path.relpath(path, ROOT)}:{line}: {name}" for path in _files()
             for line, name in task_words_in_names(open(path, encoding="utf-8").read())]
    assert found == [], "task words in names of task-neutral code:\n" + "\n".join(found)


def test_the_name_scanner_finds_what_it_looks_for():
    code = "def draw_detection(x):\n    pass\nclass GanModel:\n    pass\ndef read_video(p):\n    pass\n"
    assert task_words_in_names(code) == [(1, "draw_detection"), (3, "GanModel")]
