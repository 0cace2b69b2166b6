"""oars_deploy: the runtime an exported oars model needs and nothing more.

It depends only on numpy, opencv-python-headless, pyyaml and onnxruntime, so a deployment target installs
``deploy/python`` alone. The training packages import their torch-free pieces (file writing, errors) from here,
so both sides share one implementation and the arrow never runs from the predictor back into training code.
"""
