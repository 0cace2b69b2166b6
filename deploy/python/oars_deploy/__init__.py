"""oars_deploy: the runtime an exported oars model needs and nothing more.

It depends only on numpy, opencv-python-headless, pyyaml and onnxruntime (CuPy and TensorRT optional, imported
when asked for), so a deployment target installs ``deploy/python`` alone (``pip install deploy/python`` gives
the ``oars-infer`` command). The training packages import their torch-free pieces from here, so both sides share
one implementation and the arrow never runs from the predictor back into training code:

- ``predictor`` (``Predictor``), ``preprocess``, ``postprocess``, ``nms``, ``backends``, ``arrays``: the model's
  pre/post-processing and runtimes; ``deploy_config``: the deploy.yaml schema and reader;
- ``draw``: the pictures (palettes, boxes, masks, panels, label PNGs) that tools/infer.py and evaluation draw too;
- ``plugins`` (the registry) and ``predictors`` (one plug-in per kind of output, chosen by deploy.yaml's
  ``predictor`` key): each validates its deploy.yaml section, adds its ``oars-infer`` flags, runs the model and
  returns result records;
- ``outputs``, ``records`` (detections.json and results.jsonl), ``image_files``, ``failures``: the files a
  prediction run reads and writes;
- ``atomic``, ``errors``: atomic file writing and the user-error base with its command-line printing;
- ``extras``: an optional package (Ray, PyAV, TensorRT, CuPy) imported or refused in one line naming its extra
  (``oars.extras`` is the same mechanism with oars' table);
- ``clips``: reading video files and frame folders, frame sampling and clip pre-processing (task-neutral);
- ``moved``: the old flat names of modules that moved into a plug-in's package keep importing.

tests/deploy/test_deploy_imports.py checks that no module imports anything else.
"""

from oars_deploy.moved import install as _install_old_names

_install_old_names()


def __getattr__(name: str):
    """``from oars_deploy import Predictor`` (:class:`oars_deploy.predictor.Predictor`), imported on first use so
    that ``import oars_deploy`` stays cheap (no onnxruntime) for the training side's imports of its pieces."""
    if name == "Predictor":
        from oars_deploy.predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'oars_deploy' has no attribute {name!r}")
