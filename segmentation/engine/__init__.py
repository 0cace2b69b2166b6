"""Segmentation hooks."""

from .prediction_pictures_hook import PredictionPicturesHook

__all__ = ["PredictionPicturesHook"]
