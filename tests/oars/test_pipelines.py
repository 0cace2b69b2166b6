"""The pipelines floor (docs/extending.md, "The floors"): the compression methods are found by name in one registry,
the contract's export defaults are the exporter's (the contract calls nothing above it), and the primitives never
import the pipelines at module level."""

from __future__ import annotations

import ast
import os.path as osp

import pytest
from demo_utils import ROOT
from mmengine.config import Config

from oars.errors import OarsError
from oars.export.options import task_export_options, task_preprocess_steps
from oars.tasks import Exporter, ModelKind, Predictor, Task

PRIMITIVES = ("engine", "export", "hub", "compress", "data", "models", "evaluation", "visualization", "config")


class _ImageExporter(Exporter):
    def build_export_spec(self, model, cfg, options):  # pragma: no cover - not exported here
        raise NotImplementedError


class _ImagePredictor(Predictor):
    def infer(self, cfg, weights, inputs, output, *, device, failures, args):  # pragma: no cover
        raise NotImplementedError


class _ImageTask(Task):
    scope = "pipelines_test"
    kinds = (ModelKind("image model", _ImageExporter(), _ImagePredictor()),)

    def import_registries(self) -> None:
        return None


def test_compress_methods_are_one_registry():
    from oars.pipelines.compress import METHODS, CompressMethod, compress, register_method

    assert list(METHODS) == ["prune", "auto-prune", "sensitivity", "ptq", "qat", "distill"]
    assert all(callable(m.run) for m in METHODS.values())
    with pytest.raises(OarsError, match="registered already"):
        register_method(CompressMethod("prune", METHODS["prune"].run))
    with pytest.raises(OarsError, match=r"--method must be one of \['prune', 'auto-prune', 'sensitivity', 'ptq', "
                                        r"'qat', 'distill'\]"):
        compress(Config({}), "w.pth", "out", {"method": "quantise"})


def test_the_contract_defaults_are_the_exporters():
    task = _ImageTask()
    cfg = Config({"model": {}, "export": {"input_shape": [2, 3, 32, 48], "min_agreement": 0.9}})
    exporter = task.exporter(cfg)
    assert exporter.export_options(cfg, dynamic=False, opset=18) is None and exporter.preprocess_steps(cfg) is None
    options = task_export_options(task, cfg, dynamic=True, opset=18)
    assert options.input_shape == (2, 3, 32, 48) and options.dynamic and options.extra == {"min_agreement": 0.9}
    with pytest.raises(OarsError, match="no test_dataloader/val_dataloader"):
        task_preprocess_steps(task, cfg)


def test_primitives_do_not_import_the_pipelines_at_module_level():
    bad = []
    for floor in PRIMITIVES:
        folder = osp.join(ROOT, "oars", floor)
        for path in __import__("glob").glob(osp.join(folder, "**", "*.py"), recursive=True):
            if path.endswith(osp.join("engine", "entry.py")):
                continue  # the old home of train/evaluate, re-exporting them for code outside oars
            tree = ast.parse(open(path, encoding="utf-8").read())
            bad += [f"{path}:{n.lineno}" for n in tree.body if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("oars.pipelines")]
    assert not bad, bad
