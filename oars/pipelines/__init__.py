"""The orchestrators above the primitives: what ``tools/*.py``, :class:`oars.Model` and the studio call.

Each module runs one job end to end by calling the floors below it (the engine, export, hub, compress, data,
models, evaluation and visualization packages), which never import this package:

- :mod:`oars.pipelines.train` / :mod:`oars.pipelines.evaluate`: a Runner set up the one way (load, validate once,
  resolve the engine's defaults) and run;
- :mod:`oars.pipelines.model`: a trained model built from a config and a checkpoint (or a hub name);
- :mod:`oars.pipelines.export`: ``export_model``, the config + checkpoint to ONNX/TensorRT with deploy.yaml;
- :mod:`oars.pipelines.infer`: ``tools/infer.py`` on a stream, with the PyTorch model in the runtime's place;
- :mod:`oars.pipelines.compress`: the compression methods by name, and the table of variants.

Nothing is imported here: each tool imports the one module it runs (``tools/*.py --help`` stays light).
See ``docs/extending.md`` ("The floors") for the whole house.
"""
