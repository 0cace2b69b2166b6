"""The runtime core names no kind of output (DESIGN.md §1): every oars_deploy module outside ``predictors/`` is
task-neutral. What differs between kinds (their records, post-processing, segment decoding, drawing, server
model) lives in the kind's plug-in package, ``oars_deploy/predictors/<kind>/``, and the core reaches a plug-in
only through the registry (``oars_deploy.plugins``), which lists the built-in plug-ins by module NAME.

Checked with ast, so imports inside functions count too:

- no module path, class or function name of the core holds a kind word (:data:`KIND_WORDS`, matched against the
  words of a name: ``draw_detection_sample`` -> draw, detection, sample; ``DetectionBoxesRecord`` -> detection,
  boxes, record);
- no core module imports ``oars_deploy.predictors`` (or anything below it).

Deprecation shims are not core: a module whose top level warns with ``DeprecationWarning`` keeps an old import
path of a moved module working (``oars_deploy.video_predictor``, ``oars_deploy.segments``) and is imported by
nothing inside the package.
"""

from __future__ import annotations

import ast
import os
import os.path as osp
import re

import pytest
from demo_utils import ROOT

PACKAGE = osp.join(ROOT, "deploy", "python", "oars_deploy")
PLUGINS = osp.join(PACKAGE, "predictors")
# Words that name a kind of output (the plug-ins: detection_boxes, instance_masks, semantic_labels, clip_classes,
# feature_classes, gan_images, video_segments) or its models. Not listed, because the core shares them across
# kinds: ``boxes`` (drawing primitive, NMS, tracking), ``mask``/``masks`` (binary-mask drawing and pasting),
# ``clip``/``clips`` (reading videos into clips), ``image``/``images``, ``label``/``labels``, ``classes``.
KIND_WORDS = frozenset({
    "detection", "detections", "detector", "detectors",
    "segmentation", "segmentor", "segmentors", "segmenter", "semantic", "instance",
    "segments", "localizer", "localizers", "localization", "localisation", "timeline", "proposals", "bmn", "ctcn",
    "gan", "gans",
})
# kinds whose name is two words that are neutral alone
KIND_PHRASES = ("clip_classes", "feature_classes", "gan_images", "video_segments", "semantic_labels",
                "instance_masks", "detection_boxes")
# the registry: it names the built-in plug-ins' modules as strings and imports them on first lookup
REGISTRY = osp.join(PACKAGE, "plugins.py")


def words(name: str) -> list[str]:
    """The lower-case words of a snake_case, CamelCase or dotted name (``GANImagesRecord`` -> gan, images,
    record)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", name))
    return [w.lower() for w in re.split(r"[\s_./\\]+", spaced) if w]


def kind_words(name: str) -> list[str]:
    """The kind words (and kind phrases) in ``name``."""
    snake = "_".join(words(name))
    return [w for w in words(name) if w in KIND_WORDS] + [p for p in KIND_PHRASES if p in snake]


def is_shim(tree: ast.Module) -> bool:
    """A deprecation shim: its top level calls ``warnings.warn(..., DeprecationWarning, ...)``."""
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and "DeprecationWarning" in ast.unparse(call):
            return True
    return False


def core_modules() -> dict[str, ast.Module]:
    """``{path relative to oars_deploy: ast}`` of every core module (outside predictors/, shims left out)."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        if folder == PLUGINS or folder.startswith(PLUGINS + os.sep):
            continue
        for name in files:
            if name.endswith(".py"):
                path = osp.join(folder, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                if not is_shim(tree):
                    found[osp.relpath(path, PACKAGE)] = tree
    return found


def named_kinds(rel: str, tree: ast.Module) -> list[str]:
    """``file: what`` for the module path and every class / function name of ``tree`` holding a kind word."""
    out = [f"{rel}: module path ({', '.join(kind_words(rel[:-3]))})"] if kind_words(rel[:-3]) else []
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and kind_words(node.name):
            out.append(f"{rel}:{node.lineno}: {type(node).__name__} {node.name} "
                       f"({', '.join(kind_words(node.name))})")
    return out


def plugin_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import of ``oars_deploy.predictors`` or below, at any depth."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ([f"oars_deploy.{a.name}" for a in node.names]
                                     if node.module == "oars_deploy" else [])
        else:
            continue
        out += [(node.lineno, n) for n in names if n == "oars_deploy.predictors"
                or n.startswith("oars_deploy.predictors.")]
    return out


def test_the_core_is_found():
    core = core_modules()
    assert {"plugins.py", "records.py", "postprocess.py", "predictor.py", "cli.py", "draw/boxes.py",
            "serve/models.py", "streams/run.py", "track/stream.py"} <= set(core)
    assert not any(rel.startswith("predictors") for rel in core)


def test_the_core_names_no_kind():
    found = [hit for rel, tree in sorted(core_modules().items()) for hit in named_kinds(rel, tree)]
    assert not found, "kind words in the runtime core (move the piece into its plug-in, " \
        "oars_deploy/predictors/<kind>/):\n" + "\n".join(found)


def test_the_core_imports_no_plugin():
    found = [f"{rel}:{line}: imports {name}" for rel, tree in sorted(core_modules().items())
             for line, name in plugin_imports(tree)]
    assert not found, "the runtime core reaches a plug-in through oars_deploy.plugins, never by import:\n" + \
        "\n".join(found)


def test_the_registry_names_the_builtin_plugins_as_strings():
    from oars_deploy import plugins

    assert all(name.startswith("oars_deploy.predictors.") for name in plugins.DEFAULT_PREDICTORS)
    assert {"detection_boxes", "instance_masks", "semantic_labels", "clip_classes", "feature_classes",
            "gan_images", "video_segments"} <= set(plugins.predictor_names())


@pytest.mark.parametrize(("name", "hits"), [
    ("draw_detection_sample", ["detection"]),
    ("DetectionBoxesRecord", ["detection", "detection_boxes"]),
    ("GANImagesRecord", ["gan", "gan_images"]),
    ("ClipClassesRecord", ["clip_classes"]),
    ("segments/ctcn_decode", ["segments", "ctcn"]),
    ("draw/timeline", ["timeline"]),
    ("draw_boxes", []),
    ("overlay_mask", []),
    ("organise", []),
])
def test_the_scanner_finds_kind_words(name, hits):
    assert kind_words(name) == hits


def test_the_scanner_sees_imports_inside_functions():
    tree = ast.parse("def f():\n    from oars_deploy.predictors.detection_boxes import X\n"
                     "import oars_deploy.predictors\nfrom oars_deploy import predictors\nimport oars_deploy.plugins\n")
    assert sorted(plugin_imports(tree)) == [(2, "oars_deploy.predictors.detection_boxes"),
                                            (3, "oars_deploy.predictors"), (4, "oars_deploy.predictors")]


def test_a_shim_is_not_core():
    assert is_shim(ast.parse('import warnings\nwarnings.warn("x moved to y", DeprecationWarning)\n'))
    assert not is_shim(ast.parse("def warn():\n    pass\n"))
