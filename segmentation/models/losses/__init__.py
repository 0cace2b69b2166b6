"""Segmentation losses; each returns one scalar and names its log key with ``loss_name``."""

from .cross_entropy_loss import CrossEntropyLoss
from .dice_loss import DiceLoss

__all__ = ["CrossEntropyLoss", "DiceLoss"]
