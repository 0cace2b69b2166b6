"""Segmentation losses; each returns one scalar and names its log key with ``loss_name``."""

from .binary_cross_entropy_loss import BinaryCrossEntropyLoss
from .cross_entropy_loss import CrossEntropyLoss
from .dice_loss import DiceLoss
from .edge_loss import EdgeCrossEntropyLoss, edge_class_weights
from .focal_loss import FocalLoss
from .lovasz_loss import LovaszLoss
from .ohem_cross_entropy_loss import OhemCrossEntropyLoss

__all__ = [
    "BinaryCrossEntropyLoss",
    "CrossEntropyLoss",
    "DiceLoss",
    "EdgeCrossEntropyLoss",
    "FocalLoss",
    "LovaszLoss",
    "OhemCrossEntropyLoss",
    "edge_class_weights",
]
