"""Reading clips: video files and frame folders decoded (``decode``), which inputs a clip model takes
(``inputs``), frame sampling (``sampling``) and clip pre-processing ops (``preprocess``). Task-neutral: the
``clip_classes`` and ``feature_classes`` predictor plug-ins and the training side's decoders use them."""
