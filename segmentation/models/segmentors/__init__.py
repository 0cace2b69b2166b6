"""Segmentors: whole models (mmengine ``BaseModel``) with ``loss`` / ``predict`` / ``tensor`` modes."""

from .ace2p import ACE2PSegmentor
from .encoder_decoder import EncoderDecoder
from .slide_inference import slide_inference, window_starts
from .tta import check_aug_cfg, tta_inference

__all__ = ["ACE2PSegmentor", "EncoderDecoder", "check_aug_cfg", "slide_inference", "tta_inference", "window_starts"]
