"""Predict with an exported model folder (deploy.yaml + model.onnx, or model.engine), without torch.

``Predictor(model_dir).predict([bgr_image, ...])`` (or ``Predictor(model_dir)(image_file_folder_or_list)``) -> one
dict per image, in original image pixels, made by the post-processing of the export's image plug-in (deploy.yaml's
``predictor``: e.g. ``{'label': [H, W] int64}`` of ``semantic_labels``, ``{'bboxes', 'scores', 'labels'}`` of
``detection_boxes``; see each plug-in's ``postprocess``), the same numbers as the PyTorch model's ``test_step`` on
the same images. Pre-processing, the backend and batching are the same for every kind, here.
``Predictor(model_dir).results(source)`` gives :class:`oars_deploy.result.Result` objects instead (``.plot()``,
``.save()``, ``.to_json()`` and the plug-in's views such as ``.boxes``): the objects ``oars.Model.predict`` returns.
"""

from __future__ import annotations

import os.path as osp
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from oars_deploy.arrays import array_module
from oars_deploy.backends import make_backend
from oars_deploy.deploy_config import DEPLOY_FILE, read_deploy_yaml
from oars_deploy.draw.palette import get_palette
from oars_deploy.errors import DeployError
from oars_deploy.outputs import read_image
from oars_deploy.plugins import predictor_for
from oars_deploy.preprocess import check_steps, preprocess
from oars_deploy.result import Result
from oars_deploy.sources import SourceItem, iter_sources


class Predictor:
    """An exported model and everything around it: preprocessing, a backend, postprocessing.

    ``device``: 'cpu' or 'cuda'. ``backend``: 'onnxruntime' (model.onnx) or 'tensorrt' (model.engine).
    ``array_module``: 'numpy', 'cupy' or None (CuPy for pre/post-processing when device is cuda and CuPy runs).
    """

    def __init__(self, model_dir: str, device: str = "cpu", backend: str = "onnxruntime",
                 array_module_name: str | None = None) -> None:
        self.model_dir = model_dir
        self.deploy = read_deploy_yaml(osp.join(model_dir, DEPLOY_FILE))
        self.plugin = predictor_for(self.deploy, osp.join(model_dir, DEPLOY_FILE))
        if not hasattr(self.plugin, "postprocess"):
            raise DeployError(f"{model_dir}/{DEPLOY_FILE}: a {self.plugin.name} model ({self.plugin.describes}); "
                              "Predictor runs image models (oars-infer runs every kind)")
        self.labels: list[str] = list(self.deploy["labels"])
        self.palette = get_palette(len(self.labels), self.deploy.get("palette"))
        self.steps = check_steps(self.deploy["preprocess"])
        spec = self.deploy["input"]
        self.input_name: str = spec["name"]
        self.input_shape: list[int] = list(spec["shape"])
        self.input_dtype: str = spec.get("dtype", "float32")
        self.batch_size: int | None = None if self.input_shape[0] in (-1, None) else int(self.input_shape[0])
        self.post: dict = self.deploy["postprocess"]
        self.xp = array_module(array_module_name, device)
        self.backend = make_backend(backend, model_dir, self.deploy["model"], device)

    def preprocess(self, images: Sequence[np.ndarray]) -> tuple[Any, list[dict]]:
        """Images -> ([B, 3, H, W] input of the model's dtype, metas); checks H, W against deploy.yaml."""
        batch, metas = preprocess(images, self.steps, self.xp, self.input_dtype)
        want = tuple(self.input_shape[2:])
        if tuple(batch.shape[2:]) != want and -1 not in want:
            raise DeployError(f"{self.model_dir}/{DEPLOY_FILE}: preprocess gives inputs of (H, W) = "
                              f"{tuple(batch.shape[2:])}, the model takes {want}")
        return batch, metas

    def infer(self, batch: Any) -> dict[str, np.ndarray]:
        """Run the model on a preprocessed batch; a static-batch model runs in chunks of its batch size (the last
        chunk filled up with copies of its last image, their outputs dropped)."""
        n = batch.shape[0]
        if self.batch_size is None or n == self.batch_size:
            return self.backend({self.input_name: batch})
        xp, parts = self.xp, []
        for start in range(0, n, self.batch_size):
            chunk = batch[start:start + self.batch_size]
            real = chunk.shape[0]
            if real < self.batch_size:
                chunk = xp.concatenate([chunk] + [chunk[-1:]] * (self.batch_size - real))
            out = self.backend({self.input_name: chunk})
            parts.append({k: v[:real] for k, v in out.items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def postprocess(self, outputs: dict[str, np.ndarray], metas: list[dict]) -> list[dict]:
        """Outputs -> results by the plug-in's post-processing; a plug-in with ``array_postprocess`` (segmentation's
        resize and argmax) runs it with the array module (CuPy on the GPU)."""
        if self.plugin.array_postprocess and self.xp is not np:
            outputs = {k: self.xp.asarray(v) for k, v in outputs.items()}
        return self.plugin.postprocess(outputs, metas, self.post)

    def predict(self, images: Sequence[np.ndarray]) -> list[dict]:
        """BGR uint8 images -> one result dict per image (see the module docstring)."""
        batch, metas = self.preprocess(images)
        return self.postprocess(self.infer(batch), metas)

    def __call__(self, source: Any) -> list[dict]:
        """Predict one image or many: BGR uint8 ``[H, W, 3]`` arrays, image files (read as oars-infer reads them),
        folders of images, glob patterns, ``.txt`` lists of files, video files (every frame), or a list of these
        (:func:`oars_deploy.sources.iter_sources`); ``Predictor(export_dir)(cv2.imread("a.jpg"))[0]["label"]``.

        Returns:
            One result dict per image, in order (:meth:`predict`; one image gives a list of one). :meth:`results`
            gives :class:`oars_deploy.result.Result` objects instead.

        Raises:
            DeployError: an input that is neither an image file, a folder, a pattern nor a BGR uint8 [H, W, 3]
                array (naming it).
        """
        images = [item.image if item.image is not None else read_image(item.name) for item in iter_sources(source)]
        return self.predict(images) if images else []

    def results(self, source: Any, stream: bool = False, batch: int = 1,
                draw_threshold: float | None = None) -> list[Result] | Iterator[Result]:
        """Predict ``source`` (what :meth:`__call__` takes) into :class:`oars_deploy.result.Result` objects, the ones
        ``oars.Model.predict`` returns: ``r.boxes.xyxy``, ``r.label_map``, ``r.plot()``, ``r.save(path)``,
        ``r.to_json()``.

        Args:
            source: see :meth:`__call__`. stream: return a generator that reads, predicts and yields one batch at a
                time (constant memory over a long folder or video) instead of a list.
            batch: images per model call. draw_threshold: what ``plot()`` draws (None: the plug-in's default).

        Returns:
            The results in input order: a list, or a generator when ``stream``.

        Raises:
            DeployError: a bad input (before anything is predicted: the whole source is checked first).
        """
        if batch < 1:
            raise DeployError(f"Predictor.results: batch={batch}; expected 1 or more images per model call")
        gen = self._results(iter_sources(source), batch, draw_threshold)
        return gen if stream else list(gen)

    def _results(self, items: Iterator[SourceItem], batch: int, draw_threshold: float | None) -> Iterator[Result]:
        chunk: list[tuple[SourceItem, np.ndarray]] = []
        for item in items:
            chunk.append((item, item.image if item.image is not None else read_image(item.name)))
            if len(chunk) == batch:
                yield from self._chunk_results(chunk, draw_threshold)
                chunk = []
        if chunk:
            yield from self._chunk_results(chunk, draw_threshold)

    def _chunk_results(self, chunk: list[tuple[SourceItem, np.ndarray]],
                       draw_threshold: float | None) -> list[Result]:
        data = self.predict([image for _, image in chunk])
        return [Result(item.name, image, d, self.plugin.name, self.labels, self.palette, draw_threshold, item.frame,
                       item.stem) for (item, image), d in zip(chunk, data)]

    def benchmark(self, images: Sequence[np.ndarray], warmup: int = 5, runs: int = 30) -> dict[str, float]:
        """Latency of ``predict(images)`` (end to end) and of the model call alone: median/p90 ms, images/s."""
        batch, _ = self.preprocess(images)
        timings: dict[str, list[float]] = {"end_to_end": [], "model": []}
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            self.predict(images)
            t1 = time.perf_counter()
            self.infer(batch)
            t2 = time.perf_counter()
            if i >= warmup:
                timings["end_to_end"].append(t1 - t0)
                timings["model"].append(t2 - t1)
        stats: dict[str, float] = {"batch": float(len(images)), "runs": float(runs)}
        for name, values in timings.items():
            ms = np.asarray(values) * 1000.0
            stats[f"{name}_median_ms"] = float(np.median(ms))
            stats[f"{name}_p90_ms"] = float(np.percentile(ms, 90))
            stats[f"{name}_images_per_s"] = float(len(images) * len(ms) / (ms.sum() / 1000.0))
        return stats
