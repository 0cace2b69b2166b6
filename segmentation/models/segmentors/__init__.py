"""Segmentors: whole models (mmengine ``BaseModel``) with ``loss`` / ``predict`` / ``tensor`` modes."""

from .encoder_decoder import EncoderDecoder
from .slide_inference import slide_inference, window_starts

__all__ = ["EncoderDecoder", "slide_inference", "window_starts"]
