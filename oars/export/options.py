"""The export's options and pre-processing steps of a task: what the task says, else the core's image defaults.

Why here and not in the contract: :class:`oars.tasks.Task` sits at the bottom of the core and calls nothing above
it, so its ``export_options`` / ``preprocess_steps`` return None unless a task overrides them; every caller that
needs the values (the exporter, ``tools/get_flops.py``, the compress runs) asks through these two functions, which
fall back to the image defaults of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oars.export.deploy_config import EXPORT_EXAMPLE, export_input_hw, preprocess_steps
from oars.export.errors import ExportError
from oars.export.guards import DEFAULT_OPSET
from oars.export.spec import ExportOptions

if TYPE_CHECKING:
    from mmengine.config import Config

    from oars.tasks import Task


def export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """An image model's ``ExportOptions`` from ``cfg.export`` (clear error naming the config when the section is
    missing): the default of :meth:`oars.task_roles.Exporter.export_options`."""
    export = cfg.get("export")
    if not export:
        raise ExportError(f"{cfg.filename}: no `export` section; add one to the config (or -o export.input_shape="
                          f"[1,3,H,W]), e.g. `{EXPORT_EXAMPLE}` (B, C, H, W: the fixed input of the exported model)")
    h, w = export_input_hw(cfg)
    batch = int(export["input_shape"][0])
    extra = {k: v for k, v in dict(export).items() if k != "input_shape"}
    return ExportOptions(input_shape=(batch, 3, h, w), dynamic=dynamic, opset=int(opset), extra=extra)


def task_export_options(task: Task, cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """The exporter of ``cfg``'s kind's ``export_options`` (a model whose input is not one image reads its export
    section itself), else :func:`export_options`."""
    options = task.exporter(cfg).export_options(cfg, dynamic=dynamic, opset=opset)
    return options if options is not None else export_options(cfg, dynamic=dynamic, opset=opset)


def task_preprocess_steps(task: Task, cfg: Config) -> list[dict]:
    """The exporter of ``cfg``'s kind's ``preprocess_steps``, else an image pipeline's steps
    (:func:`oars.export.deploy_config.preprocess_steps`)."""
    steps = task.exporter(cfg).preprocess_steps(cfg)
    return steps if steps is not None else preprocess_steps(cfg)
