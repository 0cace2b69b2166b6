"""``oars.Model``: the one front door to train, evaluate, predict with and export a model from Python.

``Model(x)`` takes a config file, a config NAME shipped with oars (``"fcos_r50_fpn_1x_coco"``), a checkpoint (the
config stored in it), ``oars://NAME`` (a registered checkpoint) or an export folder (the torch-free runtime
predicts; :mod:`oars.api.model_source`). A thin layer over what the tools run, so a notebook and the command line
give the same runs, files and numbers: ``train`` is ``tools/train.py`` (:func:`oars.pipelines.train.train`),
``val`` is ``tools/eval.py`` (:func:`oars.pipelines.evaluate.evaluate`), ``export`` is ``tools/export.py``
(:func:`oars.pipelines.export.export_model`) and ``predict`` runs the config's test pipeline and model through the
task's :meth:`oars.task_roles.Predictor.predict`; every result is an :class:`oars_deploy.result.Result`, drawn and
recorded by the runtime plug-in ``oars-infer`` uses, the same object the runtime ``Predictor.results`` gives.

Config overrides: ``Model(cfg, overrides=["train_cfg.max_epochs=2"])`` holds ``-o`` style ``key=value`` strings for
every call; a call's keyword arguments add more, with ``__`` for the dots: ``model.train(train_cfg__max_epochs=2)``
is ``-o train_cfg.max_epochs=2`` (values other than strings are written as JSON, which the override parser reads
as YAML: ``optim_wrapper__optimizer__lr=0.01``, lists stay lists). ultralytics' names (``epochs``, ``batch``,
``conf``, ``iou`` ...) map to the config's keys (:mod:`oars.api.train_options`, :mod:`oars.api.predict_options`).
"""

from __future__ import annotations

import glob
import json
import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from oars.errors import OarsError
from oars_deploy.errors import UserError

from .model_source import LOCAL_SCHEME, resolve_model_source
from .prediction import (
    DEFAULT_SAVE_DIR,
    class_filter,
    export_results,
    keep_classes,
    next_run_dir,
    saving,
    torch_results,
)
from .train_options import check_train_device, data_argument

Source = str | os.PathLike | np.ndarray | Sequence[str | os.PathLike | np.ndarray]


def keyword_overrides(kwargs: dict[str, Any]) -> list[str]:
    """``{'train_cfg__max_epochs': 2}`` -> ``['train_cfg.max_epochs=2']`` (``__`` separates keys; non-string values
    as JSON, e.g. ``[1, 2]`` and ``true``, which the config's override parser reads as YAML)."""
    out = []
    for key, value in kwargs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        out.append(f"{key.replace('__', '.')}={text}")
    return out


def registered_weights(name: str) -> str:
    """The file of the registered ``oars://NAME``, its sha256 checked against the one recorded (the hub's one
    check, :func:`oars.hub.verify.check_hash`).

    Raises:
        HubError: the name is not registered or its file is gone.
        WeightsHashError: the file changed since it was registered.
    """
    from oars.hub.local import local_file

    return local_file(name[len(LOCAL_SCHEME):])


class Model:
    """A model to train, evaluate, predict with and export.

    Args:
        model: a YAML config file; a config name shipped with oars (``"fcos_r50_fpn_1x_coco"``,
            ``"detection/fcos/fcos_r50_fpn_1x_coco"``), else ``NAME.yaml`` in the current folder; a checkpoint
            (``.pth``: its stored config and weights); ``oars://NAME``; or an export folder (``deploy.yaml``:
            predict and info only).
        weights: a checkpoint (``.pth``) for a config; set by :meth:`train` otherwise.
        overrides: ``key=value`` config overrides (``-o`` of the tools) kept for every call.
        work_dir: where training and evaluation write (default the engine's ``work_dirs/<config name>``).
        device: ``cpu`` or ``cuda`` for evaluation, prediction and the export's self-check.

    Attributes:
        draw_threshold: detection pictures (``Result.plot``) draw boxes scoring at least this (None: 0.3, as
            ``tools/infer.py``); records keep every detection.

    Example::

        model = Model("unet_demo_shapes", work_dir="work_dirs/unet")
        model.train(epochs=2)
        print(model.val().mIoU)
        model.predict("img.png")[0].save("img_vis.png")
        model.export("onnx")
    """

    def __init__(self, model: str | os.PathLike, weights: str | None = None,
                 overrides: Sequence[str] | None = None, work_dir: str | None = None, device: str = "cpu") -> None:
        if isinstance(overrides, str):
            raise OarsError("Model(overrides=...): expected a list of 'key=value' strings, got one string")
        source = resolve_model_source(model, weights)
        self.config, self.weights, self.export_dir = source.config, source.weights, source.export_dir
        # oars://NAME's weights are checked again at each use (the file may be replaced after this call)
        self._registered = (source.registered, self.weights) if source.registered else None
        self.overrides = list(overrides or ())
        if self.export_dir and self.overrides:
            raise OarsError(f"Model({self.export_dir!r}, overrides=...): an export folder is fixed; config overrides "
                            "apply to configs and checkpoints")
        self.work_dir = work_dir
        self.device = device
        self.draw_threshold: float | None = None
        self._cfgs: dict[tuple[str, ...], Any] = {}
        self._model = None
        self._model_key: tuple | None = None
        self._runtime = None

    def __repr__(self) -> str:
        if self.export_dir:
            return f"Model(export_dir={self.export_dir!r}, device={self.device!r})"
        return f"Model(config={self.config!r}, weights={self.weights!r}, device={self.device!r})"

    # -------------------------------------------------------------------------------------------------- the config
    def _config(self, extra: Sequence[str] = ()):
        """The loaded config with :attr:`overrides` and ``extra``, checked as the tools check it (a misspelt type
        named with did-you-mean); kept per set of overrides."""
        self._refuse_export("config")
        key = tuple(self.overrides) + tuple(extra)
        if key not in self._cfgs:
            from oars.config.check import load_checked_config

            self._cfgs[key] = load_checked_config(self.config, list(key))
        return self._cfgs[key]

    @property
    def cfg(self):
        """The loaded config (overrides applied), an mmengine ``Config``."""
        return self._config()

    def _refuse_export(self, what: str) -> None:
        if self.export_dir:
            raise OarsError(f"Model({self.export_dir!r}) is an export folder: it predicts (predict, info, names) "
                            f"but has no {what}; use Model(CONFIG or CHECKPOINT) to train, val or export")

    def _need_weights(self, what: str) -> str:
        """:attr:`weights` before a load; those of ``oars://NAME`` (unless replaced since) re-checked first."""
        if not self.weights:
            raise OarsError(f"Model.{what} needs weights: Model(config, weights='model.pth'), Model('model.pth') or "
                            "model.train() first")
        if self._registered is not None and self.weights == self._registered[1]:
            registered_weights(self._registered[0])  # WeightsHashError when the file changed since registering
        return self.weights

    # ------------------------------------------------------------------------------------------------ what it is
    @property
    def names(self) -> dict[int, str]:
        """``{class id: class name}`` (an export's deploy.yaml labels; else the checkpoint's classes, else the
        config's)."""
        if self.export_dir:
            return dict(enumerate(self._predictor().labels))
        from .info import config_names

        return config_names(self.cfg, self.weights)

    def info(self, verbose: bool = True) -> dict[str, Any]:
        """Parameters, FLOPs (one forward on the export input, as ``tools/get_flops.py``), input size, classes.

        Args:
            verbose: print the short table too.

        Returns:
            ``{'parameters', 'flops', 'input_size', 'classes', 'names', 'model', 'config' | 'export_dir', ...}``
            (an export folder: ``parameters``/``flops`` None).
        """
        from .info import export_info, format_info, torch_info

        info = export_info(self._predictor()) if self.export_dir else torch_info(self.cfg, self.weights, self.device)
        if verbose:
            print(format_info(info))
        return info

    # --------------------------------------------------------------------------------------------------- training
    def train(self, data: str | None = None, epochs: int | None = None, batch: int | None = None,
              imgsz: int | None = None, lr0: float | None = None, workers: int | None = None,
              device: str | None = None, amp: bool = False, resume: bool | str = False, exist_ok: bool = False,
              **overrides: Any) -> dict:
        """Train as ``tools/train.py -c CONFIG -o ...``; afterwards :attr:`weights` is the best checkpoint
        (``best_*.pth``) when the run kept one, else the last, and the overrides are kept for the later calls
        (the weights belong to that config).

        Args:
            data: a dataset description file (``--data``) for every loader. epochs: ``train_cfg.max_epochs``.
            batch: ``train_dataloader.batch_size``. imgsz: every fixed resize step's scale. lr0: the optimizer's
            ``lr``. workers: every loader's ``num_workers``. device: ``cpu``/``cuda``, checked against the
            machine (training uses CUDA when there is one). amp: ``--amp``. resume: ``--resume`` (True: the work
            dir's last checkpoint, or a checkpoint path). exist_ok: ``--overwrite`` (start afresh in a work dir
            that holds another run's checkpoints). overrides: more ``a__b=v`` (``-o a.b=v``).

        Returns:
            ``{'work_dir', 'weights', 'metrics'}``: ``metrics`` the last validation's numbers (empty without one).

        Raises:
            OarsError: a bad argument, or a work dir holding another run's checkpoints without ``resume=True`` /
                ``exist_ok=True`` (the message names these arguments).
        """
        from oars.engine.work_dir import latest_checkpoint
        from oars.pipelines.train import train

        from .train_options import api_message, train_overrides

        self._refuse_export("training")
        check_train_device(device)
        run_overrides = self.overrides + keyword_overrides(overrides)
        cfg = self._config(keyword_overrides(overrides))
        run_overrides += train_overrides(cfg, epochs=epochs, batch=batch, imgsz=imgsz, lr0=lr0, workers=workers)
        kwargs: dict[str, Any] = {"work_dir": self.work_dir, "resume": resume or None, "amp": amp,
                                  "overwrite": exist_ok}
        if data is not None:
            kwargs["data"] = data_argument(train, data, "train")
        if resume and exist_ok:
            raise OarsError("Model.train(resume=..., exist_ok=True): resume continues the run in the work dir and "
                            "exist_ok deletes its checkpoints; give one of them")
        try:
            runner = train(self.config, run_overrides, **kwargs)
        except UserError as err:
            raise type(err)(api_message(str(err))) from None
        work_dir = runner.work_dir
        # the weights belong to the config they were trained with: later calls use the same overrides
        self.overrides, self._cfgs, self._model = run_overrides, {}, None
        best = sorted(glob.glob(osp.join(work_dir, "best_*.pth")), key=osp.getmtime)
        self.weights = best[-1] if best else latest_checkpoint(work_dir)
        self._registered = None
        self.work_dir = work_dir
        scalars = runner.message_hub.log_scalars
        metrics = {k[len("val/"):]: float(v.current()) for k, v in scalars.items()
                   if k.startswith("val/") and k not in ("val/time", "val/data_time")}
        return {"work_dir": work_dir, "weights": self.weights, "metrics": metrics}

    def val(self, data: str | None = None, **overrides: Any):
        """Evaluate :attr:`weights` on the config's test set, as ``tools/eval.py`` (writes
        ``<work_dir>/metrics.json``).

        Args:
            data: a dataset description file (``--data``) to evaluate on instead of the config's test set.
            overrides: more ``a__b=v`` (``-o a.b=v``).

        Returns:
            :class:`oars.api.metrics.Metrics`: ``m["mIoU"]``, ``m.coco.bbox_mAP_50``, the tasks' aliases
            (``m.box.map50``), ``m.to_dict()``; ``m.results`` is what ``tools/eval.py`` returned
            (``metrics_file``...).
        """
        from oars.pipelines.evaluate import evaluate
        from oars.tasks import get_task

        from .metrics import Metrics, check_metrics, register_metric_aliases

        self._refuse_export("val (evaluate an export with tools/eval.py --model-dir)")
        kwargs: dict[str, Any] = {"work_dir": self.work_dir, "device": self.device}
        if data is not None:
            kwargs["data"] = data_argument(evaluate, data, "val")
        result = evaluate(self.config, self._need_weights("val"), self.overrides + keyword_overrides(overrides),
                          **kwargs)
        register_metric_aliases(get_task(self.cfg.get("default_scope"), self.config).metric_aliases)
        return Metrics(check_metrics(result.get("metrics")), result)

    # ------------------------------------------------------------------------------------------------- prediction
    def _torch_model(self, cfg):
        """The model of ``cfg`` with :attr:`weights`, built once per (weights, device, overrides)."""
        from oars.pipelines.model import init_model

        key = (self._need_weights("predict"), self.device, cfg.filename, json.dumps(cfg.get("model"), default=str))
        if self._model is None or self._model_key != key:
            self._model = init_model(cfg, key[0], self.device)
            self._model_key = key
        return self._model

    def _predictor(self):
        """The runtime predictor of an export folder, made once."""
        if self._runtime is None:
            from oars_deploy.predictor import Predictor

            self._runtime = Predictor(self.export_dir, device=self.device)
        return self._runtime

    def predict(self, source: Source, conf: float | None = None, iou: float | None = None,
                classes: Sequence[int] | None = None, max_det: int | None = None,
                imgsz: int | Sequence[int] | None = None, save: bool = False, save_dir: str | None = None,
                stream: bool = False) -> list | Iterator:
        """Predict images (a video model: video files) with the PyTorch model, or with the runtime for an export.

        Args:
            source: an image file, a folder of images, a glob pattern, a ``.txt`` list of files, a BGR uint8
                ``[H, W, 3]`` array (as ``cv2.imread`` gives), a video file (an image model: every frame; a video
                model: the clip), or a list of these. An input the pipeline cannot read stops the call with a
                message naming it (``tools/infer.py`` skips and lists those instead).
            conf: keep predictions scoring at least this (the model's test-time ``score_thr``).
            iou: the NMS IoU threshold. max_det: at most this many predictions per image (``max_per_img``).
            classes: keep only these class ids. imgsz: the test pipeline's resize scale (a PyTorch model).
            save: write each result's picture (:meth:`Result.plot`) to ``save_dir`` as ``<stem>.png``.
            save_dir: default ``runs/predict``; a folder already holding files gets ``2``, ``3``... appended.
            stream: a generator that reads, predicts and yields one input at a time (constant memory over a long
                folder or video) instead of a list.

        Returns:
            One :class:`oars_deploy.result.Result` per input (a folder: per image, sorted; a video of an image
            model: per frame), in order: a list, or a generator when ``stream``.

        Raises:
            OarsError / DeployError: an input that is neither a file, a folder, a pattern nor a BGR uint8
                [H, W, 3] array (naming it), or a knob this model has no setting for (naming the argument).
        """
        from oars_deploy.sources import iter_sources

        keep = class_filter(classes)
        if self.export_dir:
            results = export_results(self._predictor(), source, self.export_dir, self.draw_threshold,
                                     conf=conf, iou=iou, max_det=max_det, imgsz=imgsz)
        else:
            from oars.tasks import get_task

            from .predict_options import knob_overrides

            cfg = self._config()
            knobs = knob_overrides(cfg, conf=conf, iou=iou, max_det=max_det, imgsz=imgsz)
            cfg = self._config(knobs) if knobs else cfg
            role = get_task(cfg.get("default_scope"), cfg.filename).predictor(cfg)
            items = iter_sources(source, "Model.predict", video_frames=role.image_plugin is not None)
            model = self._torch_model(cfg)
            results = torch_results(role, model, cfg, items, self.draw_threshold, batch=1 if stream else None)
        if keep is not None:
            results = (keep_classes(r, keep) for r in results)
        if save:
            out_dir = next_run_dir(save_dir or DEFAULT_SAVE_DIR)
            results = saving(results, out_dir)
        return results if stream else list(results)

    def __call__(self, source: Source, **kwargs: Any) -> list | Iterator:
        """:meth:`predict`."""
        return self.predict(source, **kwargs)

    # ----------------------------------------------------------------------------------------------------- search
    def tune(self, space: str, trials: int, *, metric: str | None = None, direction: str | None = None,
             budget_epochs: int | None = None, work_dir: str | None = None, storage: str | None = None,
             pruner: str = "halving", ray: bool = False, ray_address: str | None = None, min_epochs: int = 1,
             **overrides: Any) -> dict:
        """Search hyper-parameters as ``tools/tune.py`` (:func:`oars.pipelines.tune.tune`): ``space`` is a YAML
        file of config keys, ``trials`` the finished trials to reach (a second call continues the study);
        ``min_epochs``: the pruner's first rung (``--min-epochs``).

        Returns:
            ``{'best': TrialRecord | None, 'best_yaml': path, 'report': path, 'trials': path}``.
        """
        from oars.pipelines.tune import tune

        self._refuse_export("tune (search with a config or checkpoint)")
        return tune(self.config, space, trials=trials, metric=metric, direction=direction,
                    budget_epochs=budget_epochs, work_dir=work_dir, storage=storage,
                    overrides=self.overrides + keyword_overrides(overrides), pruner=pruner, ray=ray,
                    ray_address=ray_address, min_epochs=min_epochs)

    # ----------------------------------------------------------------------------------------------------- export
    def export(self, format: str = "onnx", out_dir: str | None = None, **kwargs: Any) -> str:
        """Export :attr:`weights` as ``tools/export.py`` does (model.onnx + deploy.yaml, checked against PyTorch).

        Args:
            format: ``onnx``, ``tensorrt`` or an edge format (``openvino``, ``ort``, ``ncnn``, ``mnn``, ``litert``;
                ``min_agreement=`` sets the parity threshold).
            out_dir: the export folder (default ``export/`` beside the weights); an existing export is refused
                unless ``overwrite=True``.
            **kwargs: :func:`oars.pipelines.export.export_model`'s options (``dynamic``, ``opset``, ``half``,
                ``int8``, ``calib_dir``, ``check``, ``overwrite``, ``task_options``).

        Returns:
            The export folder, for ``Model(folder)``, ``oars_deploy.Predictor(folder)`` or ``oars-infer
            --model-dir``.
        """
        from oars.pipelines.export import export_model

        self._refuse_export("export (it is one)")
        weights = self._need_weights("export")
        out_dir = out_dir or osp.join(osp.dirname(osp.abspath(weights)), "export")
        export_model(self.config, weights, out_dir, fmt=format, overrides=self.overrides, device=self.device,
                     **kwargs)
        return out_dir
