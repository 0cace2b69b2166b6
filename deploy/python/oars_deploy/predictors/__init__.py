"""The built-in predictor plug-ins, one module per kind of output (see :mod:`oars_deploy.plugins`).

Importing this package registers them (in the order of the imports below, which is the order of their
``oars-infer`` flags in ``--help``): ``clip_classes``, ``detection_boxes``, ``feature_classes``, ``gan_images``,
``instance_masks``, ``semantic_labels``, ``video_segments``. Each wraps the runtime modules that existed before plug-ins
(``predictor``, ``postprocess``, ``video_cli``, ``video_features_predictor``, ``gan_cli``), which keep working as
they are.
"""

from oars_deploy.predictors import (  # noqa: F401  (importing registers the plug-ins)
    clip_classes,
    detection_boxes,
    feature_classes,
    gan_images,
    instance_masks,
    semantic_labels,
    video_segments,
)
