"""Moved to :mod:`oars.pipelines.infer` (stream inference is a pipeline: it builds the model and runs the runtime's
stream reader). This name keeps old imports working; nothing inside oars imports it."""

from __future__ import annotations

import warnings

from oars.pipelines.infer import (  # noqa: F401  (the old names)
    TorchFramePredictor,
    add_stream_arguments,
    infer_stream,
    refuse_stream_flags,
    stream_plugin,
)

warnings.warn("oars.stream_inference moved to oars.pipelines.infer", DeprecationWarning, stacklevel=2)
