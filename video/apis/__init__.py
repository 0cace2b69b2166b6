"""Video inference entry point used by tools/infer.py (dispatched by ``default_scope``)."""

from .inference import predict_video, run_inference

__all__ = ["predict_video", "run_inference"]
