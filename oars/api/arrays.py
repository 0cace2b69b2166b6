"""The test pipeline over in-memory images as well as files, for the Python API's ``predict`` (``oars.api``).

``tools/infer.py`` feeds file paths to the config's test pipeline (``oars.inference.batched_predict``); the API
also takes BGR arrays that never were files. Rather than writing them to temporary files, the pipeline's
``LoadImageFromFile`` step is wrapped: an input that carries its array skips the read and gets the same keys
(``img``, ``img_shape``, ``ori_shape``), every later step runs unchanged. A task's
:meth:`oars.task_roles.Predictor.predict` calls :func:`predict_samples` with its own annotation loaders to drop and,
where it has one, its own batch predictor (the one its ``tools/infer.py`` uses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate

from oars.errors import OarsError
from oars.inference import build_test_pipeline
from oars_deploy.sources import check_image_array  # one check for the API and the runtime (gan/task.py uses it)

IMAGE_LOADER = "LoadImageFromFile"


class ArrayOrFileLoader:
    """The pipeline's image loader, skipping the read when the input carries its image (``results['img']``).

    Why a wrapper and not a registered transform: configs keep naming ``LoadImageFromFile``; only the API's
    in-memory inputs need the other behaviour, and file inputs still go through the config's own loader.
    """

    def __init__(self, loader: Callable[[dict], dict]) -> None:
        self.loader = loader

    def __call__(self, results: dict) -> dict:
        if results.get("img") is None:
            return self.loader(results)
        shape = tuple(int(s) for s in results["img"].shape[:2])
        results["img_shape"] = shape
        results["ori_shape"] = shape
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.loader!r})"


def array_pipeline(cfg: Config, drop: Sequence[str] = ()):
    """The config's test pipeline minus ``drop`` (annotation loaders), its image loader taking arrays too.

    Returns:
        mmengine ``Compose``.

    Raises:
        OarsError: the pipeline has no ``LoadImageFromFile`` step (it does not read images).
    """
    pipeline = build_test_pipeline(cfg, drop=drop)
    found = False
    for i, step in enumerate(pipeline.transforms):
        if type(step).__name__ == IMAGE_LOADER:
            pipeline.transforms[i] = ArrayOrFileLoader(step)
            found = True
    if not found:
        raise OarsError(f"{cfg.filename}: the test pipeline has no {IMAGE_LOADER} step, so it cannot take images")
    return pipeline


def predict_samples(model: torch.nn.Module, cfg: Config, inputs: Sequence[tuple[str, np.ndarray | None]],
                    drop: Sequence[str] = (), batch_size: int = 1,
                    predict: Callable[[torch.nn.Module, dict], list] | None = None) -> list[Any]:
    """Run ``inputs`` through the test pipeline and the model in batches; one predicted data sample each.

    Args:
        model: eval-mode model. cfg: the resolved config (its test pipeline).
        inputs: ``(name, array)``: ``array`` BGR uint8 [H, W, 3], or None to read the image file ``name``.
        drop: the task's annotation-loading step types. batch_size: images per forward pass.
        predict: ``predict(model, collated_batch) -> samples`` (default ``model.test_step``).

    Returns:
        The data samples (``pred_*`` fields in original pixels), in input order.
    """
    predict = predict or (lambda m, batch: m.test_step(batch))
    pipeline = array_pipeline(cfg, drop)
    samples: list[Any] = []
    for start in range(0, len(inputs), batch_size):
        items = []
        for name, array in inputs[start:start + batch_size]:
            item = {"img_path": name}
            if array is not None:
                item["img"] = check_image_array(array, name)
            items.append(pipeline(item))
        with torch.no_grad():
            samples.extend(predict(model, pseudo_collate(items)))
    return samples
