"""Building blocks shared by backbones, necks and heads."""

from .activation import ACT_LAYERS, build_activation_layer
from .conv_module import ConvNormAct
from .deform_conv import ModulatedDeformConv2d, modulated_deform_conv
from .norm import NORM_LAYERS, build_norm_layer, norm_type

__all__ = ["ACT_LAYERS", "NORM_LAYERS", "ConvNormAct", "ModulatedDeformConv2d", "build_activation_layer",
           "build_norm_layer", "modulated_deform_conv", "norm_type"]
