"""Serving and batch inference on Ray (``pip install oars-deploy[serve]``): ``oars-serve`` puts an export behind
HTTP with Ray Serve (:mod:`oars_deploy.serve.cli`, :mod:`oars_deploy.serve.app`), ``oars-infer --ray`` predicts a
folder with Ray Data (:mod:`oars_deploy.serve.ray_data`). Both run the runtime predictor ``oars-infer`` runs and
return its result records (:mod:`oars_deploy.serve.models`). Ray is imported by the modules that need it only."""
