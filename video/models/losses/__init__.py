"""Recognizer losses (registered in ``video.registry.MODELS``); each returns one scalar named by ``loss_name``."""

from .bmn_loss import BMNLoss
from .cross_entropy_loss import BCELossWithLogits, CrossEntropyLoss

__all__ = ["BCELossWithLogits", "BMNLoss", "CrossEntropyLoss"]
