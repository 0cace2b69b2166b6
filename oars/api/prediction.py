"""What ``oars.Model.predict`` does besides calling the task's predictor: the class filter, saving pictures into a
fresh ``runs/predict*`` folder, and producing :class:`oars_deploy.result.Result` objects from a PyTorch model or an
export's runtime predictor (lazily, so ``stream=True`` keeps memory constant)."""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from oars.errors import OarsError

from .predict_options import export_postprocess

DEFAULT_SAVE_DIR = osp.join("runs", "predict")


def next_run_dir(base: str) -> str:
    """``base`` when it is free (missing or empty), else ``base2``, ``base3``... (ultralytics' ``runs/predict``,
    ``runs/predict2``): a second ``predict(save=True)`` never writes over the first one's pictures."""
    candidate, n = base, 1
    while osp.isdir(candidate) and os.listdir(candidate) or osp.isfile(candidate):
        n += 1
        candidate = f"{base}{n}"
    return candidate


def export_results(predictor: Any, source: Any, export_dir: str, draw_threshold: float | None, *,
                   conf: float | None, iou: float | None, max_det: int | None, imgsz: Any) -> Iterator:
    """Results of the runtime ``predictor`` of ``export_dir`` over ``source``, lazily, with ``conf`` / ``iou`` /
    ``max_det`` set in its post-processing for this call only (an export keeps its input size: ``imgsz`` refused)."""
    if imgsz is not None:
        raise OarsError(f"Model.predict(imgsz={imgsz!r}): the export {export_dir} takes the input size "
                        f"it was exported with ({predictor.input_shape}); export again for another size")
    post = export_postprocess(predictor.deploy["postprocess"], conf, iou, max_det, export_dir)
    results = predictor.results(source, stream=True, draw_threshold=draw_threshold)  # the source checked now

    def generate() -> Iterator:
        saved, predictor.post = predictor.post, post
        try:
            yield from results
        finally:
            predictor.post = saved

    return generate()


def torch_results(role: Any, model: Any, cfg: Any, items: Any, draw_threshold: float | None,
                  batch: int | None) -> Iterator:
    """Results of the task's predictor over ``items``, ``batch`` inputs per call (None: all at once)."""
    from oars_deploy.draw import get_palette
    from oars_deploy.outputs import read_image
    from oars_deploy.result import Result

    meta = getattr(model, "dataset_meta", None) or {}
    labels = list(meta.get("classes") or [str(i) for i in range(int(getattr(model, "num_classes", 0)))])
    palette = get_palette(len(labels), meta.get("palette")) if labels else []  # generators have no classes

    def chunks():
        chunk = []
        for item in items:
            chunk.append(item)
            if batch is not None and len(chunk) == batch:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    for chunk in chunks():
        kind, data = role.predict(model, cfg, [(item.name, item.image) for item in chunk])
        for item, d in zip(chunk, data):
            image = item.image if item.image is not None else (read_image(item.name) if is_image(item.name)
                                                               else None)
            yield Result(item.name, image, d, kind, labels, palette, draw_threshold, item.frame, item.stem)


def class_filter(classes: Sequence[int] | None) -> list[int] | None:
    if classes is None:
        return None
    values = [classes] if isinstance(classes, int) else list(classes)
    if not values or not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 0
                             for c in values):
        raise OarsError(f"Model.predict(classes={classes!r}): expected class ids (ints of 0 or more), e.g. [0, 2]")
    return [int(c) for c in values]


def keep_classes(result: Any, classes: list[int]) -> Any:
    """``result`` with only the predictions of ``classes`` (the plug-in's ``keep_classes``)."""
    keep = getattr(result._plugin, "keep_classes", None)  # noqa: SLF001 - the Result's own plug-in
    if keep is None:
        raise OarsError(f"Model.predict(classes=...): predictor {result.predictor!r} ({result._plugin.describes}) "  # noqa: SLF001
                        "gives no per-object classes to filter")
    from oars_deploy.result import Result

    return Result(result.path, result.orig_img, keep(result.data, classes), result.predictor, result.labels,
                  result.palette, result.draw_threshold, result.frame, result.stem)


def saving(results: Iterator, out_dir: str) -> Iterator:
    """Yield ``results``, each picture written first as ``<out_dir>/<stem>.png`` (``Result.stem``: unique across
    the inputs by :func:`oars_deploy.output_paths.output_stems`, a frame ``<video stem>_<index>``)."""
    os.makedirs(out_dir, exist_ok=True)
    for result in results:
        path = osp.join(out_dir, f"{result.stem}.png")
        os.makedirs(osp.dirname(path), exist_ok=True)
        result.save(path)
        yield result


def is_image(path: str) -> bool:
    from oars_deploy.image_files import IMAGE_SUFFIXES

    return osp.splitext(path)[1].lower() in IMAGE_SUFFIXES
