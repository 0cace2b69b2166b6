"""Necks: fuse a backbone's multi-scale features before the heads."""

from .ic_neck import CascadeFeatureFusion, ICNeck

__all__ = ["CascadeFeatureFusion", "ICNeck"]
