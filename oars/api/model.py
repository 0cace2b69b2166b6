"""``oars.Model``: train, evaluate, predict and export from Python in a few lines.

A thin layer over what the tools run, so a notebook and the command line give the same runs, files and numbers:
``train`` is ``tools/train.py`` (:func:`oars.pipelines.train.train`), ``val`` is ``tools/eval.py``
(:func:`oars.pipelines.evaluate.evaluate`), ``export`` is ``tools/export.py``
(:func:`oars.pipelines.export.export_model`) and ``predict`` runs the config's test pipeline and model through the
task's :meth:`oars.task_roles.Predictor.predict`, then draws and records each result with the runtime predictor plug-in
``oars-infer`` uses (:class:`oars.api.result.Result`).

Config overrides: ``Model(cfg, overrides=["train_cfg.max_epochs=2"])`` holds ``-o`` style ``key=value`` strings for
every call; a call's keyword arguments add more, with ``__`` for the dots: ``model.train(train_cfg__max_epochs=2)``
is ``-o train_cfg.max_epochs=2`` (values other than strings are written as JSON, which the override parser reads
as YAML: ``optim_wrapper__optimizer__lr=0.01``, ``train_dataloader__batch_size=4``, lists stay lists).
"""

from __future__ import annotations

import glob
import json
import os
import os.path as osp
from collections.abc import Sequence
from typing import Any

import numpy as np

from oars.errors import OarsError
from oars_deploy.image_files import list_images

LOCAL_SCHEME = "oars://"  # oars.hub.local.LOCAL_SCHEME, spelled here so that importing this module stays light
Source = str | os.PathLike | np.ndarray | Sequence[str | os.PathLike | np.ndarray]


def keyword_overrides(kwargs: dict[str, Any]) -> list[str]:
    """``{'train_cfg__max_epochs': 2}`` -> ``['train_cfg.max_epochs=2']`` (``__`` separates keys; non-string values
    as JSON, e.g. ``[1, 2]`` and ``true``, which the config's override parser reads as YAML)."""
    out = []
    for key, value in kwargs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        out.append(f"{key.replace('__', '.')}={text}")
    return out


def resolve_config(config: str | os.PathLike, weights: str | None) -> tuple[str, str | None]:
    """A config file, or ``oars://NAME`` (a checkpoint registered with ``tools/hub.py register NAME PATH --config
    CFG``), which gives both the config and, unless ``weights`` is given, the weights (their sha256 checked, as
    every load of the name: :func:`registered_weights`).

    Raises:
        OarsError: the file does not exist, or the registered name has no config recorded.
        WeightsHashError: the registered file changed since it was registered.
    """
    config = os.fspath(config)
    if config.startswith(LOCAL_SCHEME):
        from oars.hub.entries import local_entry
        from oars.hub.local import read_registry

        name = config[len(LOCAL_SCHEME):]
        local_entry(name)  # an unknown name: HubError listing the close ones
        registered = read_registry()[name].get("config")
        if not registered:
            raise OarsError(f"{config}: registered without a config; register it again with --config CFG, or give "
                            "Model(CONFIG_FILE, weights=...)")
        if not osp.isfile(registered):
            raise OarsError(f"{config}: its config {registered} no longer exists; register it again with --config")
        return registered, weights or registered_weights(config)
    if not osp.isfile(config):
        raise OarsError(f"Model: config file not found: {config} (expected a YAML config or oars://NAME)")
    return config, weights


def registered_weights(name: str) -> str:
    """The file of the registered ``oars://NAME``, its sha256 checked against the one recorded (the hub's one
    check, :func:`oars.hub.verify.check_hash`; a file unchanged since the last check in this process is not read
    again).

    Raises:
        HubError: the name is not registered or its file is gone.
        WeightsHashError: the file changed since it was registered.
    """
    from oars.hub.local import local_file

    return local_file(name[len(LOCAL_SCHEME):])


class Model:
    """A config (+ weights) to train, evaluate, predict with and export.

    Args:
        config: a YAML config file, or ``oars://NAME`` (a registered checkpoint and its config).
        weights: a checkpoint (``.pth``) to evaluate, predict and export with; set by :meth:`train` otherwise.
        overrides: ``key=value`` config overrides (``-o`` of the tools) kept for every call.
        work_dir: where training and evaluation write (default the engine's ``work_dirs/<config name>``).
        device: ``cpu`` or ``cuda`` for evaluation, prediction and the export's self-check.

    Attributes:
        draw_threshold: detection pictures (``Result.plot``) draw boxes scoring at least this (None: 0.3, as
            ``tools/infer.py``); records keep every detection.

    Example::

        model = Model("configs/segmentation/unet/unet_demo_shapes.yaml", work_dir="work_dirs/unet")
        model.train(train_cfg__max_epochs=2)
        print(model.val()["metrics"])
        model.predict("img.png")[0].save("img_vis.png")
        model.export("onnx")
    """

    def __init__(self, config: str | os.PathLike, weights: str | None = None, overrides: Sequence[str] | None = None,
                 work_dir: str | None = None, device: str = "cpu") -> None:
        self.config, self.weights = resolve_config(config, weights)
        # oars://NAME's weights are checked again at each use (the file may be replaced after this call)
        named = os.fspath(config)
        self._registered = (named, self.weights) if named.startswith(LOCAL_SCHEME) and not weights else None
        if isinstance(overrides, str):
            raise OarsError("Model(overrides=...): expected a list of 'key=value' strings, got one string")
        self.overrides = list(overrides or ())
        self.work_dir = work_dir
        self.device = device
        self.draw_threshold: float | None = None
        self._cfg = None
        self._model = None
        self._model_key: tuple | None = None

    def __repr__(self) -> str:
        return f"Model(config={self.config!r}, weights={self.weights!r}, device={self.device!r})"

    @property
    def cfg(self):
        """The loaded config (overrides applied), an mmengine ``Config``."""
        if self._cfg is None:  # checked as the tools check it: a misspelt type named with did-you-mean
            from oars.config.check import load_checked_config

            self._cfg = load_checked_config(self.config, self.overrides)
        return self._cfg

    def _need_weights(self, what: str) -> str:
        """:attr:`weights` before a load; those of ``oars://NAME`` (unless replaced since) re-checked first."""
        if not self.weights:
            raise OarsError(f"Model.{what} needs weights: Model(config, weights='model.pth') or model.train() first")
        if self._registered is not None and self.weights == self._registered[1]:
            registered_weights(self._registered[0])  # WeightsHashError when the file changed since registering
        return self.weights

    # --------------------------------------------------------------------------------------------------- training
    def train(self, **overrides: Any) -> dict:
        """Train as ``tools/train.py -c CONFIG -o ...`` with the model's and these overrides (``a__b=v`` is
        ``-o a.b=v``); afterwards :attr:`weights` is the best checkpoint (``best_*.pth``) when the run kept one,
        else the last, and these overrides are kept for the later calls (the weights belong to that config).
        A work dir that holds another run's checkpoints is refused, as by ``tools/train.py``: give another
        ``work_dir``.

        Returns:
            ``{'work_dir', 'weights', 'metrics'}``: ``metrics`` the last validation's numbers (empty without one).
        """
        from oars.engine.work_dir import latest_checkpoint
        from oars.pipelines.train import train

        run_overrides = self.overrides + keyword_overrides(overrides)
        runner = train(self.config, run_overrides, work_dir=self.work_dir)
        work_dir = runner.work_dir
        # the weights belong to the config they were trained with: later calls use the same overrides
        self.overrides, self._cfg, self._model = run_overrides, None, None
        best = sorted(glob.glob(osp.join(work_dir, "best_*.pth")), key=osp.getmtime)
        last = latest_checkpoint(work_dir)
        self.weights = best[-1] if best else last
        self.work_dir = work_dir
        scalars = runner.message_hub.log_scalars
        metrics = {k[len("val/"):]: float(v.current()) for k, v in scalars.items()
                   if k.startswith("val/") and k not in ("val/time", "val/data_time")}
        return {"work_dir": work_dir, "weights": self.weights, "metrics": metrics}

    def val(self, **overrides: Any) -> dict:
        """Evaluate :attr:`weights` on the config's test set, as ``tools/eval.py`` (writes
        ``<work_dir>/metrics.json``).

        Returns:
            ``{'metrics': {name: value}, 'metrics_file', ...}`` (:func:`oars.pipelines.evaluate.evaluate`).
        """
        from oars.pipelines.evaluate import evaluate

        return evaluate(self.config, self._need_weights("val"), self.overrides + keyword_overrides(overrides),
                        work_dir=self.work_dir, device=self.device)

    # ------------------------------------------------------------------------------------------------- prediction
    def _torch_model(self):
        """The model with :attr:`weights`, built once per (weights, device) and kept for the next calls."""
        from oars.pipelines.model import init_model

        key = (self._need_weights("predict"), self.device)
        if self._model is None or self._model_key != key:
            self._model = init_model(self.cfg, key[0], self.device)
            self._model_key = key
        return self._model

    def predict(self, source: Source) -> list:
        """Predict images (or videos, for a video model) with the PyTorch model.

        Args:
            source: an image file, a folder of images, a BGR uint8 ``[H, W, 3]`` array (as ``cv2.imread`` gives),
                a video file for a video model, or a list of these. An input the pipeline cannot read stops the
                call with a message naming it (``tools/infer.py`` skips and lists those instead).

        Returns:
            One :class:`oars.api.result.Result` per input (a folder: per image, sorted), in order.

        Raises:
            OarsError: an input that is neither a file, a folder nor a BGR uint8 [H, W, 3] array (naming it).
        """
        from oars.tasks import get_task
        from oars_deploy.draw import get_palette
        from oars_deploy.outputs import read_image

        from .result import Result

        inputs = expand_source(source)
        cfg = self.cfg
        model = self._torch_model()
        task = get_task(cfg.get("default_scope"), cfg.filename)
        kind, results = task.predictor(cfg).predict(model, cfg, inputs)
        meta = getattr(model, "dataset_meta", None) or {}
        classes = list(meta.get("classes") or [str(i) for i in range(int(getattr(model, "num_classes", 0)))])
        palette = get_palette(len(classes), meta.get("palette")) if classes else []  # generators have no classes
        out = []
        for (name, array), data in zip(inputs, results):
            image = array if array is not None else (read_image(name) if _is_image(name) else None)
            out.append(Result(name, image, data, kind, classes, palette, self.draw_threshold))
        return out

    def __call__(self, source: Source) -> list:
        """:meth:`predict`."""
        return self.predict(source)

    # ----------------------------------------------------------------------------------------------------- export
    def export(self, format: str = "onnx", out_dir: str | None = None, **kwargs: Any) -> str:
        """Export :attr:`weights` as ``tools/export.py`` does (model.onnx + deploy.yaml, checked against PyTorch).

        Args:
            format: ``onnx`` or ``tensorrt``.
            out_dir: the export folder (default ``export/`` beside the weights); an existing export is refused
                unless ``overwrite=True``.
            **kwargs: :func:`oars.pipelines.export.export_model`'s options (``dynamic``, ``opset``, ``half``,
                ``int8``, ``calib_dir``, ``check``, ``overwrite``, ``task_options``).

        Returns:
            The export folder, for ``oars_deploy.Predictor(folder)`` or ``oars-infer --model-dir``.
        """
        from oars.pipelines.export import export_model

        weights = self._need_weights("export")
        out_dir = out_dir or osp.join(osp.dirname(osp.abspath(weights)), "export")
        export_model(self.config, weights, out_dir, fmt=format, overrides=self.overrides, device=self.device,
                     **kwargs)
        return out_dir


def expand_source(source: Any) -> list[tuple[str, np.ndarray | None]]:
    """``source`` as ``(name, array or None)`` pairs: arrays named ``array_<i>``, folders listed (images, sorted).

    Raises:
        OarsError: a path that does not exist, an empty folder, or something that is neither a path nor an array.
    """
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise OarsError("Model.predict: nothing to predict (an empty list)")
    out: list[tuple[str, np.ndarray | None]] = []
    for i, item in enumerate(items):
        if isinstance(item, np.ndarray):
            out.append((f"array_{i}", item))
        elif isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            if osp.isdir(path):
                out.extend((p, None) for p in list_images(path))
            elif osp.isfile(path):
                out.append((path, None))
            else:
                raise OarsError(f"Model.predict: no such file or folder: {path}")
        else:
            raise OarsError(f"Model.predict: input {i} is a {type(item).__name__}; expected a file or folder path or "
                            "a BGR uint8 [H, W, 3] NumPy array")
    return out


def _is_image(path: str) -> bool:
    from oars_deploy.image_files import IMAGE_SUFFIXES

    return osp.splitext(path)[1].lower() in IMAGE_SUFFIXES

