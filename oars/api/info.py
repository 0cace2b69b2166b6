"""``Model.info()`` and ``Model.names``: what a model is, counted as ``tools/get_flops.py`` counts it.

The parameters and FLOPs are those of one forward of the export graph on the config's export input
(:func:`oars.analysis.config_model.build_count_target` + :func:`oars.analysis.flops.count_flops`, the tool's own
code): random weights, since counts do not depend on the values. An export folder reports what its deploy.yaml
says (input, classes, predictor): its graph is not run through PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oars.errors import OarsError


def config_names(cfg: Any, weights: str | None) -> dict[int, str]:
    """``{id: class name}``: the checkpoint's ``dataset_meta`` classes (what predictions are named with), else the
    test set's ``metainfo.classes`` in the config, else ``str(id)`` for ``model.num_classes``; ``{}`` for a model
    without classes (a generator)."""
    classes = None
    if weights:
        from oars.checkpoint_file import checkpoint_meta

        classes = ((checkpoint_meta(weights) or {}).get("dataset_meta") or {}).get("classes")
    if not classes:
        for name in ("test_dataloader", "val_dataloader", "train_dataloader"):
            dataset = (cfg.get(name) or {}).get("dataset") or {}
            classes = (dataset.get("metainfo") or {}).get("classes") if isinstance(dataset, Mapping) else None
            if classes:
                break
    if not classes:
        count = (cfg.get("model") or {}).get("num_classes")
        classes = [str(i) for i in range(int(count))] if isinstance(count, int) else []
    return dict(enumerate(str(c) for c in classes))


def torch_info(cfg: Any, weights: str | None, device: str) -> dict[str, Any]:
    """The counts of the config's model (see the module docstring).

    Returns:
        ``{'config', 'weights', 'model', 'parameters', 'flops', 'input_size', 'classes', 'names'}``.

    Raises:
        OarsError: the model does not run on its export input (the tool's message).
    """
    from oars.analysis.config_model import build_count_target
    from oars.analysis.flops import count_flops

    target = build_count_target(cfg, None, device=device)
    try:
        report = count_flops(target.module, target.inputs, target.input_names)
    except (RuntimeError, ValueError) as err:
        shapes = ", ".join(f"{n} {list(x.shape)}" for n, x in zip(target.input_names, target.inputs))
        raise OarsError(f"Model.info: {cfg.filename}: {type(target.model).__name__} does not run on {shapes}: "
                        f"{type(err).__name__}: {str(err)[:300]}") from None
    names = config_names(cfg, weights)
    return {"config": cfg.filename, "weights": weights, "model": type(target.model).__name__,
            "parameters": int(report.model_params), "flops": int(report.flops),
            "input_size": list(target.inputs[0].shape) if target.inputs else None,
            "classes": len(names), "names": names}


def export_info(predictor: Any) -> dict[str, Any]:
    """What an export folder's deploy.yaml says (no parameter or FLOP count: the graph is not run here)."""
    names = dict(enumerate(predictor.labels))
    return {"export_dir": predictor.model_dir, "model": predictor.deploy["model"].get("name"),
            "predictor": predictor.plugin.name, "parameters": None, "flops": None,
            "input_size": list(predictor.input_shape), "classes": len(names), "names": names}


def format_info(info: Mapping[str, Any]) -> str:
    """The short table ``Model.info()`` prints."""
    from oars.analysis.flops import human

    rows = []
    for key in ("config", "export_dir", "weights", "model", "predictor", "parameters", "flops", "input_size",
                "classes"):
        if key not in info:
            continue
        value = info[key]
        if key in ("parameters", "flops") and value is not None:
            value = f"{human(value, 'FLOPs' if key == 'flops' else '')} ({value:,})"
        rows.append((key, "-" if value is None else str(value)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
