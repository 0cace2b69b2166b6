"""Inference entry point used by tools/infer.py (dispatched by ``default_scope``)."""

from .inference import run_inference

__all__ = ["run_inference"]
