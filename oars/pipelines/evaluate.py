"""``tools/eval.py`` in-process: a checkpoint (or an export folder, run by the torch-free predictor) evaluated on
the config's test set the one way of :mod:`oars.engine.run_setup`, with metrics.json, the report, pictures and the
predictions' records as asked.
"""

from __future__ import annotations

import json
import math
import os.path as osp
from collections.abc import Sequence

from mmengine.config import Config
from mmengine.registry import HOOKS

from oars.config.check import load_checked_config
from oars.engine.checkpoint import check_checkpoint_file
from oars.engine.resolve import RunOptions, add_hook
from oars.engine.results_dump_hook import ResultsDumpHook, check_out_file
from oars.engine.run_errors import setup_errors_are_config_errors
from oars.engine.run_setup import load, validated_and_resolved
from oars.engine.runner import OarsRunner, build_runner
from oars.errors import OarsError
from oars.tasks import find_task
from oars_deploy.atomic import atomic_write
from oars_deploy.deploy_config import DEPLOY_FILE
from oars_deploy.output_paths import check_output_folder


def evaluate(config: str, checkpoint: str | None, overrides: Sequence[str] = (), *, work_dir: str | None = None,
             show_dir: str | None = None, max_show: int = 24, report: bool = False, model_dir: str | None = None,
             device: str = "cpu", backend: str = "onnxruntime", out: str | None = None,
             overwrite: bool = False, data: str | None = None) -> dict:
    """Evaluate ``checkpoint`` (or the export folder ``model_dir``) on the config's test set; writes
    ``<work_dir>/metrics.json``.

    ``show_dir`` adds the task's visualisation hook, which draws predictions next to the ground truth;
    ``report`` adds the task's ``EvaluationReportHook``, which writes ``<work_dir>/report.html``. With
    ``model_dir`` the model is the export run by the torch-free predictor on ``device`` / ``backend``
    (:class:`oars.models.exported.ExportedModel`): the same data, metrics, report and pictures. ``out`` adds
    :class:`oars.engine.results_dump_hook.ResultsDumpHook`, which writes every prediction as the task's JSON
    records (detection: COCO results); an existing ``out`` is refused unless ``overwrite``. ``data``: a dataset
    description file (``--data``; :mod:`oars.config.data_description`) whose test split (else val) is evaluated.
    """
    if (checkpoint is None) == (model_dir is None):
        raise OarsError("give either -w CHECKPOINT (a PyTorch checkpoint) or --model-dir EXPORT_DIR (an export "
                        "folder), not both and not neither")
    results_file = out  # (``out`` names metrics.json below)
    if results_file is not None:  # before anything slow: the likeliest mistake is a file that is already there
        check_out_file(results_file, overwrite)
    cfg = load(config, overrides) if data is None else load_checked_config(config, overrides, check=False, data=data,
                                                                           data_splits=("test",))
    if report:
        _require_hook(cfg, _report_hook(cfg, "report.html")["type"], "--report")
    if show_dir:
        _require_hook(cfg, "PredictionPicturesHook", "--show-dir")
    if model_dir is not None:
        _use_export(cfg, model_dir, device, backend)
    else:
        check_checkpoint_file(checkpoint)  # before the data is touched: a wrong -w is the likelier mistake
    # only the test split is checked: evaluating needs neither the training nor the validation data on the machine
    cfg = validated_and_resolved(cfg, RunOptions(work_dir=work_dir, load_from=checkpoint), ("test_dataloader",))
    if show_dir:  # pictures never go into the data they are drawn from
        data_root = ((cfg.get("test_dataloader") or {}).get("dataset") or {}).get("data_root")
        check_output_folder(show_dir, data_root, flag="--show-dir", input_flag="test_dataloader.dataset.data_root")
        add_hook(cfg, {"type": "PredictionPicturesHook", "out_dir": show_dir, "max_images": max_show},
                 "--show-dir flag")
    report_file = None
    if report:
        report_file = osp.join(cfg.work_dir, "report.html")
        # absolute: the hook puts a relative out_file under the work dir, which would join a relative one twice
        add_hook(cfg, _report_hook(cfg, osp.abspath(report_file)), "--report flag")
    if results_file is not None:
        add_hook(cfg, {"type": ResultsDumpHook.__name__, "out_file": osp.abspath(results_file),
                       "overwrite": overwrite},
                 "--out flag")
    runner = build_runner(cfg)
    runner.strict_load = True
    with setup_errors_are_config_errors(cfg, runner):
        metrics = runner.test()
    metrics = {k: _plain(v) for k, v in metrics.items()}
    extra = _metric_details(runner)
    out = osp.join(cfg.work_dir, "metrics.json")
    source = {"checkpoint": checkpoint} if model_dir is None else {"model_dir": osp.abspath(model_dir)}
    atomic_write(out, json.dumps(_json_safe({**source, "metrics": metrics, **extra}), indent=2))
    result = {"metrics": metrics, "metrics_file": out, **extra}
    if report_file:
        result["report_file"] = report_file
    if results_file is not None:
        result["out_file"] = results_file
    return result


def _use_export(cfg: Config, model_dir: str, device: str, backend: str) -> None:
    """Swap the config's model for the export folder (:class:`oars.models.exported.ExportedModel`): the model
    section is replaced, the rest (data, evaluator, hooks) kept; a missing folder or deploy.yaml is refused first."""
    if not osp.isfile(osp.join(model_dir, DEPLOY_FILE)):
        raise OarsError(f"--model-dir {model_dir}: no {DEPLOY_FILE} there (an export folder written by "
                        "tools/export.py holds deploy.yaml and model.onnx)")
    model_cfg = cfg.model.to_dict() if hasattr(cfg.model, "to_dict") else dict(cfg.model)
    cfg.model = {"type": "ExportedModel", "model_dir": osp.abspath(model_dir), "scope": cfg.get("default_scope"),
                 "device": device, "backend": backend, "model_cfg": model_cfg}
    cfg.pop("load_from", None)
    # weight averaging (EMA) belongs to the trained network; the export holds the weights it was exported with
    hooks = cfg.get("custom_hooks") or []
    cfg.custom_hooks = [h for h in hooks if "EMA" not in str(h.get("type", ""))]


def _report_hook(cfg: Config, out_file: str) -> dict:
    """The hook config of ``--report``: the task's (``Data.report_hook`` of its kind), else the scope's
    ``EvaluationReportHook``."""
    task = find_task(cfg.get("default_scope"))
    return task.data(cfg).report_hook(cfg, out_file) if task is not None else {"type": "EvaluationReportHook",
                                                                     "out_file": out_file}


def _require_hook(cfg: Config, name: str, option: str) -> None:
    """A clear error when the config's task has no hook ``name`` (e.g. --report on segmentation)."""
    scope = cfg.get("default_scope")
    with HOOKS.switch_scope_and_registry(scope) as registry:
        found = registry.get(name) is not None
    if not found:
        raise OarsError(f"{option} is not available for default_scope {scope!r} (no {name} in that task)")


def _metric_details(runner: OarsRunner) -> dict:
    """Per-class tables that metrics expose through ``per_class_table()``."""
    details = {}
    for metric in runner.test_evaluator.metrics:
        fn = getattr(metric, "per_class_table", None)
        if callable(fn):
            details[f"{type(metric).__name__} per class"] = fn()
    return {"details": details} if details else {}


def _json_safe(value):
    """NaN (a class absent from the data) becomes null: metrics.json stays strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _plain(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
