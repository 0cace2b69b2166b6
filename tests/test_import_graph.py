"""The arrows of DESIGN.md §1, read from the source (ast, so imports inside functions count too):
a task never imports another task, the runtime (oars_deploy) imports no training code, and no module-level
import cycle exists among the core, the tasks and the runtime (a cycle works only by the order modules happen to
load in, and breaks the day someone imports them in another order)."""

from __future__ import annotations

import ast
import os
import os.path as osp

import pytest
from demo_utils import ROOT

TASKS = ("detection", "segmentation", "video", "gan")
PACKAGES = {"oars": ROOT, **{t: ROOT for t in TASKS}, "oars_deploy": osp.join(ROOT, "deploy", "python")}


def _modules() -> dict[str, str]:
    """Dotted module name -> file, for every module of the core, the tasks and the runtime."""
    found = {}
    for package, base in PACKAGES.items():
        for folder, _, files in os.walk(osp.join(base, package)):
            for name in files:
                if name.endswith(".py"):
                    path = osp.join(folder, name)
                    dotted = osp.relpath(path, base)[:-3].replace(os.sep, ".")
                    found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ours that ``import name`` loads (``a.b.func`` -> ``a.b``), or None for outside modules."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


PATH_TO_MODULE = {path: dotted for dotted, path in MODULES.items()}


def _imports(path: str, module_level_only: bool) -> list[tuple[str, int]]:
    """(imported module of ours, line) of every import in ``path`` (only the top-level statements if asked);
    relative imports (``from .checkpoint import x``) are resolved against the file's own package."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    here = PATH_TO_MODULE.get(path, "")
    package = here if path.endswith("__init__.py") else here.rpartition(".")[0]
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out += [(target, node.lineno) for target in map(_resolve, names) if target]
    return out


def test_modules_were_found():
    for package in PACKAGES:
        assert package in MODULES, package


@pytest.mark.parametrize("task", TASKS)
def test_a_task_never_imports_another_task(task):
    bad = [f"{MODULES[m]}:{line}: imports {target}" for m in MODULES if m.split(".")[0] == task
           for target, line in _imports(MODULES[m], module_level_only=False)
           if target.split(".")[0] in TASKS and target.split(".")[0] != task]
    assert not bad, "\n".join(bad)


def test_the_runtime_imports_no_training_code():
    bad = [f"{MODULES[m]}:{line}: imports {target}" for m in MODULES if m.split(".")[0] == "oars_deploy"
           for target, line in _imports(MODULES[m], module_level_only=False)
           if target.split(".")[0] != "oars_deploy"]
    assert not bad, "\n".join(bad)


def test_no_module_level_import_cycle():
    graph = {m: {t for t, _ in _imports(p, module_level_only=True) if t != m} for m, p in MODULES.items()}
    cycles = _cycles(graph)
    assert not cycles, "module-level import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# Imports inside functions that may close a circle among our modules. Empty, and meant to stay so: an import moved
# into a function to hide a circle still ties the two modules together (the circle only waits for another import
# order). Optional heavy dependencies (Ray, torch-pruning, TensorRT, PyAV) are imported inside functions for speed
# and for the extras, but they are not our modules and cannot close a circle here.
ALLOWED_FUNCTION_LEVEL_EDGES: frozenset[tuple[str, str]] = frozenset()


def test_no_import_cycle_counting_imports_inside_functions():
    graph = {m: {t for t, _ in _imports(p, module_level_only=False)
                 if t != m and (m, t) not in ALLOWED_FUNCTION_LEVEL_EDGES} for m, p in MODULES.items()}
    cycles = _cycles(graph)
    lines = []
    for cycle in cycles:
        members = set(cycle)
        edges = [f"  {m} ({MODULES[m]}:{line}) -> {t}" for m in cycle
                 for t, line in _imports(MODULES[m], module_level_only=False) if t in members and t != m]
        lines.append(" -> ".join(cycle) + "\n" + "\n".join(edges))
    assert not cycles, "import cycles (imports inside functions counted):\n" + "\n".join(lines)


def test_relative_imports_are_resolved():
    """``from .checkpoint import x`` inside oars/engine/ is an edge to oars.engine.checkpoint (the graph missed
    relative imports before, and with them the circle prune <-> prune_kept)."""
    edges = {t for t, _ in _imports(MODULES["oars.engine.runner"], module_level_only=True)}
    assert "oars.engine.checkpoint" in edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative: the graph has ~600 nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_deploy_tools_import_no_training_code():
    """deploy/cpp/opencv_compat.py rewrites exports on a deployment machine: runtime and onnx only."""
    path = osp.join(ROOT, "deploy", "cpp", "opencv_compat.py")
    bad = [f"{path}:{line}: imports {target}" for target, line in _imports(path, module_level_only=False)
           if target.split(".")[0] != "oars_deploy"]
    assert not bad, "\n".join(bad)
