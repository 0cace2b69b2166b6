"""GAN inference entry points used by tools/infer.py."""

from .inference import run_inference

__all__ = ["run_inference"]
