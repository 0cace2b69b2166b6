"""The orchestrators above the primitives: what ``tools/*.py`` and :class:`oars.Model` call.

Each module runs one job end to end by calling the floors below it (the engine, export, hub, compress, data,
models, evaluation and visualization packages), which never import this package:

- :mod:`oars.pipelines.train` / :mod:`oars.pipelines.evaluate`: a Runner set up the one way (load, validate once,
  resolve the engine's defaults) and run;
- :mod:`oars.pipelines.model`: a trained model built from a config and a checkpoint (or a hub name);
- :mod:`oars.pipelines.export`: ``export_model``, the config + checkpoint to ONNX (and OpenVINO, ONNX Runtime
  mobile, TensorRT: :mod:`oars.export.formats`) with deploy.yaml;
- :mod:`oars.pipelines.infer`: ``tools/infer.py`` on a stream, with the PyTorch model in the runtime's place;
- :mod:`oars.pipelines.compress` (a package): the compression methods by name, their runs (pruning, automatic
  pruning, sensitivity, PTQ, QAT, distillation) and the table of variants;
- :mod:`oars.pipelines.tune` (a package): hyper-parameter search on Optuna or Ray Tune.

Nothing is imported here: each tool imports the one module it runs (``tools/*.py --help`` stays light).
See ``docs/extending.md`` ("The floors") for the whole house.
"""
