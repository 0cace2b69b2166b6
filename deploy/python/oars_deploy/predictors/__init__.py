"""The built-in predictor plug-ins, one sub-package (or module) per kind of output (see :mod:`oars_deploy.plugins`):
``clip_classes``, ``detection_boxes``, ``feature_classes``, ``gan_images``, ``instance_masks``, ``semantic_labels``,
``video_segments``. Each holds everything of its kind: its deploy.yaml section, post-processing, result records,
pictures, ``oars-infer`` flags and, where the kind is served, its server model. The registry lists them by module
name (``oars_deploy.plugins.DEFAULT_PREDICTORS``) and imports them on the first lookup; this package imports none.
"""
