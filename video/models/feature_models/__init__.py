"""Models of pre-extracted frame features (YouTube-8M style): AttentionLSTM, AttentionCluster, NeXtVLAD and the
FeatureRecognizer that runs them (registered in ``video.registry.MODELS`` on import)."""

from .attention_cluster import AttentionCluster, ShiftingAttention
from .attention_lstm import AttentionLSTM, LSTMAttentionPool
from .base import FeatureHead
from .masking import masked_softmax, reverse_valid
from .nextvlad import ContextGating, NeXtVLAD, NeXtVLADLayer
from .recognizer import FeatureRecognizer

__all__ = [
    "AttentionCluster",
    "AttentionLSTM",
    "ContextGating",
    "FeatureHead",
    "FeatureRecognizer",
    "LSTMAttentionPool",
    "NeXtVLAD",
    "NeXtVLADLayer",
    "ShiftingAttention",
    "masked_softmax",
    "reverse_valid",
]
