"""oars_deploy stands alone: every module imports only the standard library, its runtime dependencies and itself.

A static scan (ast), so it also covers imports inside functions and modules no other test loads; the venv test
(test_deploy_standalone.py) runs the installed package where torch and the training code are absent.
"""

from __future__ import annotations

import ast
import os
import os.path as osp
import sys

from demo_utils import ROOT

PACKAGE = osp.join(ROOT, "deploy", "python", "oars_deploy")
RUNTIME = {"numpy", "cv2", "yaml", "onnxruntime"}
OPTIONAL = {"cupy", "tensorrt", "av"}  # imported only inside the functions that need them (av: video models)
ALLOWED = set(sys.stdlib_module_names) | RUNTIME | OPTIONAL | {"oars_deploy", "__future__"}
# the serve extra (pip install deploy/python[serve]): only oars_deploy.serve may import it, and nothing else imports
# oars_deploy.serve at module level (oars-infer --ray imports it inside its branch). A plug-in's server model (its
# package's served.py, a ServedModel subclass) belongs to the server: only the server imports it, through the
# plug-in's served_model(), inside that method
SERVE_EXTRA = {"ray", "fastapi", "starlette", "PIL"}
SERVE_PACKAGE = osp.join(PACKAGE, "serve")


def _server_side(path: str) -> bool:
    """oars_deploy.serve, or a plug-in's server model (``predictors/<kind>/served.py``)."""
    return path.startswith(SERVE_PACKAGE + os.sep) or (
        path.startswith(osp.join(PACKAGE, "predictors") + os.sep) and osp.basename(path) == "served.py")


def _imports(path: str) -> list[tuple[str, int, bool]]:
    """(top-level module name, line, at module level) for every import in the file."""
    tree = ast.parse(open(path).read(), path)
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import; use oars_deploy.<module>"
            found.append((node.module.split(".")[0], node.lineno, id(node) in top))
    return found


def _modules() -> list[str]:
    return sorted(osp.join(d, f) for d, _, files in os.walk(PACKAGE) for f in files if f.endswith(".py"))


def test_runtime_modules_import_only_the_runtime():
    bad = [f"{osp.relpath(p, ROOT)}:{line}: {name}" for p in _modules() for name, line, _ in _imports(p)
           if name not in ALLOWED and not (name in SERVE_EXTRA and p.startswith(SERVE_PACKAGE + os.sep))]
    assert not bad, "oars_deploy may import only the stdlib, numpy, cv2, yaml, onnxruntime (cupy, tensorrt lazily):\n" \
        + "\n".join(bad)


def test_only_the_cli_branch_imports_the_server():
    def eager_imports(of: str) -> list[str]:
        return [f"{osp.relpath(p, ROOT)}:{line}" for p in _modules() if not _server_side(p)
                for name, line, at_top in _imports(p) if at_top and name == "oars_deploy"
                and of in open(p).read().splitlines()[line - 1]]

    eager = eager_imports("oars_deploy.serve")
    assert not eager, "oars_deploy.serve (Ray) may be imported at module level only inside itself:\n" + "\n".join(eager)
    eager = eager_imports(".served ")
    assert not eager, "a plug-in's served.py is the server's: import it inside served_model():\n" + "\n".join(eager)


def test_optional_packages_are_imported_lazily():
    eager = [f"{osp.relpath(p, ROOT)}:{line}: {name}" for p in _modules() for name, line, at_top in _imports(p)
             if name in OPTIONAL and at_top]
    assert not eager, "cupy / tensorrt / av must be imported inside the functions that need them:\n" + "\n".join(eager)


def test_scan_sees_all_modules_and_would_catch_torch(tmp_path):
    names = {osp.relpath(p, PACKAGE) for p in _modules()}
    assert {"predictor.py", "cli.py", "preprocess.py", "draw/detection.py", "draw/label_png.py"} <= names
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    import torch\n    from oars.x import y\n")
    assert [(n, at_top) for n, _, at_top in _imports(str(bad))] == [("torch", False), ("oars", False)]
