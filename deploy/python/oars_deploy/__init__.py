"""oars_deploy: the runtime an exported oars model needs and nothing more.

It depends only on numpy, opencv-python-headless, pyyaml and onnxruntime (CuPy and TensorRT optional, imported
when asked for), so a deployment target installs ``deploy/python`` alone (``pip install deploy/python`` gives
the ``oars-infer`` command). The training packages import their torch-free pieces from here, so both sides share
one implementation and the arrow never runs from the predictor back into training code:

The runtime core names no kind of output (tests/deploy/test_runtime_core_names_no_kind.py):

- ``predictor`` (``Predictor``), ``preprocess``, ``postprocess`` (shared resizes), ``nms``, ``mask_paste``,
  ``backends``, ``arrays``: the model's pre/post-processing primitives and runtimes; ``deploy_config``: the
  deploy.yaml schema and reader;
- ``draw``: the drawing primitives (palettes, boxes, masks, panels, label PNGs) that tools/infer.py and evaluation
  draw with too;
- ``plugins`` (the registry, which names the built-in plug-ins by module) and ``predictors`` (one plug-in package
  per kind of output, chosen by deploy.yaml's ``predictor`` key): each validates its deploy.yaml section, adds its
  ``oars-infer`` flags, runs the model and returns its result records; it holds its kind's post-processing,
  records, pictures and server model. The core asks a plug-in for what it can do (``tracks``, ``run_windows``,
  ``served_model``), never imports one;
- ``outputs``, ``records`` (results.jsonl), ``image_files``, ``suffixes``, ``failures``: the files a prediction run
  reads and writes;
- ``atomic``, ``errors``: atomic file writing and the user-error base with its command-line printing;
- ``extras``: an optional package (Ray, PyAV, TensorRT, CuPy) imported or refused in one line naming its extra
  (``oars.extras`` is the same mechanism with oars' table);
- ``clips``: reading video files and frame folders, frame sampling and clip pre-processing (task-neutral);
- ``streams``, ``track``: image models over a video stream, ByteTrack; ``serve``: the server and batch inference;
- deprecated names: the old modules that moved into a plug-in's package or into ``clips`` (``video_predictor``,
  ``gan_cli``, ``segments``, ``draw.detection`` ...) are shims that stand for the moved module, with a
  DeprecationWarning.

tests/deploy/test_deploy_imports.py checks that no module imports anything else.
"""

def __getattr__(name: str):
    """``from oars_deploy import Predictor`` (:class:`oars_deploy.predictor.Predictor`), imported on first use so
    that ``import oars_deploy`` stays cheap (no onnxruntime) for the training side's imports of its pieces."""
    if name == "Predictor":
        from oars_deploy.predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'oars_deploy' has no attribute {name!r}")
