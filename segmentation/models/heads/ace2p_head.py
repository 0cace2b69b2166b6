"""ACE2P head (Li et al., "Self-Correction for Human Parsing", the CVPR 2019 LIP challenge winner): context, decoder,
edge and fusion branches over the four stages of a ResNet-101 with a deep stem and output stride 16.

Laid out as ``AugmentCE2P`` in the authors' code (``GoGoDuck912/Self-Correction-Human-Parsing``,
``networks/AugmentCE2P.py``), module by module:

* context (``PSPModule``): adaptive average pools with bins 1, 2, 3, 6 over layer4 (2048 ch), each a 1x1
  conv 2048 -> 512 + norm + act, upsampled and concatenated *before* the layer4 map (2048 + 4 * 512 = 4096 ch),
  then a 3x3 conv 4096 -> 512 + norm + act;
* decoder (``Decoder_Module``): context 1x1 512 -> 256 upsampled to layer1's size (1/4), layer1 1x1 256 -> 48,
  concatenated (304), two 1x1 convs 304 -> 256 -> 256 (each + norm + act), classifier 1x1 256 -> classes (bias);
* edge (``Edge_Module``): layers 1-3 (256, 512, 1024 ch) each 1x1 -> 256 + norm + act ("edge features"), one
  shared 3x3 conv 256 -> 2 (bias) on each, the three 2-class maps upsampled to 1/4 and fused by a 1x1 conv 6 -> 2
  (bias); the three feature maps upsampled and concatenated (768 ch);
* fusion (``fushion``): decoder features (256) + edge features (768) = 1024 -> 1x1 256 + norm + act, Dropout2d
  0.1, classifier 1x1 256 -> classes (bias).

Outputs (all at layer1's resolution, 1/4 of the input): parsing logits, fusion logits, edge logits (2 classes).
The fused map is the prediction (``predict``, ``tensor`` mode, export).

Difference from the authors' code: their every norm is InPlaceABNSync (a CUDA extension: batch norm fused with a
leaky ReLU of slope 0.01, synchronised across GPUs, computed in place to save memory). Here each is plain
``BatchNorm2d`` followed by ``LeakyReLU(0.01)`` - the same function and the same parameter count (weight and bias
per channel), without the extension; use ``norm: SyncBN`` for the cross-GPU statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..utils import resize
from .decode_head import BaseDecodeHead

# InPlaceABN's default activation: leaky ReLU with slope 0.01
LEAKY = {"type": "LeakyReLU", "negative_slope": 0.01}
OUTPUT_NAMES = ("parsing", "fusion", "edge")


class ACE2PContext(nn.Module):
    """SCHP's ``PSPModule``: one pooled branch per bin, concatenated before the input map, then a 3x3 bottleneck.

    Args:
        in_channels: channels of the deepest feature (2048).
        channels: branch and output width (512).
        pool_scales: bins of the adaptive pools (1, 2, 3, 6).
        norm: norm spec; act: activation spec after each norm.
        align_corners: of the bilinear upsampling of the branches (SCHP: True).
    """

    def __init__(self, in_channels: int, channels: int, pool_scales: Sequence[int], norm: Any, act: Any,
                 align_corners: bool) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.AdaptiveAvgPool2d(s), ConvNormAct(in_channels, channels, 1, norm=norm, act=act))
            for s in pool_scales
        )
        self.bottleneck = ConvNormAct(in_channels + len(pool_scales) * channels, channels, 3, norm=norm, act=act)
        self.align_corners = align_corners

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, in_channels, h, w] -> [B, channels, h, w]."""
        size = x.shape[-2:]
        priors = [resize(stage(x), size, self.align_corners) for stage in self.stages]
        return self.bottleneck(torch.cat([*priors, x], dim=1))


class ACE2PEdge(nn.Module):
    """SCHP's ``Edge_Module``: per-stage 1x1 projections, one shared 3x3 edge classifier, a 1x1 fusion of the three
    2-class maps. Returns (edge logits [B, 2, H1, W1], edge features [B, 3 * channels, H1, W1]) at the first
    input's size."""

    def __init__(self, in_channels: Sequence[int], channels: int, norm: Any, act: Any, align_corners: bool) -> None:
        super().__init__()
        self.projections = nn.ModuleList(ConvNormAct(c, channels, 1, norm=norm, act=act) for c in in_channels)
        self.classifier = nn.Conv2d(channels, 2, 3, padding=1)  # SCHP's conv4, shared by the three stages
        self.fuse = nn.Conv2d(2 * len(in_channels), 2, 1)  # SCHP's conv5
        self.align_corners = align_corners

    def forward(self, feats: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        size = feats[0].shape[-2:]
        edge_feats = [proj(x) for proj, x in zip(self.projections, feats)]
        edges = [resize(self.classifier(f), size, self.align_corners) for f in edge_feats]
        edge_feats = [resize(f, size, self.align_corners) for f in edge_feats]
        return self.fuse(torch.cat(edges, dim=1)), torch.cat(edge_feats, dim=1)


@MODELS.register_module()
class ACE2PHead(BaseDecodeHead):
    """The ACE2P head over ``in_index`` = the four ResNet stages (layer1 .. layer4); see the module docstring.

    ``forward`` returns ``(parsing, fusion, edge)`` logits at layer1's resolution; ``predict`` the fusion logits
    resized to the requested size. ``loss_decode`` (CE 0.5 + Lovász 0.5 in the ACE2P configs: SCHP's
    ``0.5 * lambda_1 * (CE + Lovász)`` with ``lambda_1 = 1``) is applied to the parsing *and* the fusion logits, each
    at the label's size; ``loss_edge`` (:class:`EdgeCrossEntropyLoss`, SCHP's ``lambda_2 = 1``) to the edge logits
    against the edge targets (0 / 1 / ignore).

    Args:
        in_channels: every stage's channels (passed by the segmentor) or those picked by ``in_index``.
        num_classes: parsing classes.
        channels: decoder and fusion width (256; ``conv_seg`` is the decoder's classifier 256 -> classes).
        context_channels: the context module's width (512).
        skip_channels: the decoder's layer1 projection (48).
        edge_channels: each edge projection's width (256).
        pool_scales: the context module's bins.
        fusion_dropout: Dropout2d before the fusion classifier (SCHP: 0.1).
        act: the activation after every norm (LeakyReLU 0.01, as InPlaceABN).
        loss_edge: the edge loss config.
        in_index: the four stages' indices in the backbone's outputs (layer1, layer2, layer3, layer4 order).
        dropout_ratio: before the parsing classifier (SCHP: none, 0).
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        num_classes: int,
        channels: int = 256,
        context_channels: int = 512,
        skip_channels: int = 48,
        edge_channels: int = 256,
        pool_scales: Sequence[int] = (1, 2, 3, 6),
        fusion_dropout: float = 0.1,
        act: Any = LEAKY,
        loss_edge: dict[str, Any] | None = None,
        in_index: Sequence[int] = (0, 1, 2, 3),
        dropout_ratio: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if isinstance(in_index, int) or len(in_index) != 4:
            raise ValueError(f"ACE2PHead: in_index must list the four ResNet stages (layer1..layer4), e.g. "
                             f"[0, 1, 2, 3], got {in_index!r}")
        scales = tuple(pool_scales)
        if not scales or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in scales):
            raise ValueError(f"ACE2PHead: pool_scales must be a non-empty list of positive ints, got {pool_scales!r}")
        super().__init__(in_channels, channels, num_classes, in_index=in_index, dropout_ratio=dropout_ratio, **kwargs)
        c1, c2, c3, c4 = self.in_channels
        norm, ac = self.norm, self.align_corners
        self.context = ACE2PContext(c4, context_channels, scales, norm, act, ac)
        self.context_proj = ConvNormAct(context_channels, channels, 1, norm=norm, act=act)  # decoder conv1
        self.skip_proj = ConvNormAct(c1, skip_channels, 1, norm=norm, act=act)  # decoder conv2
        self.decoder = nn.Sequential(  # decoder conv3
            ConvNormAct(channels + skip_channels, channels, 1, norm=norm, act=act),
            ConvNormAct(channels, channels, 1, norm=norm, act=act),
        )
        self.edge = ACE2PEdge((c1, c2, c3), edge_channels, norm, act, ac)
        self.fusion = nn.Sequential(
            ConvNormAct(channels + 3 * edge_channels, channels, 1, norm=norm, act=act),
            nn.Dropout2d(fusion_dropout) if fusion_dropout > 0 else nn.Identity(),
            nn.Conv2d(channels, num_classes, 1),
        )
        self.loss_edge = MODELS.build(loss_edge or dict(type="EdgeCrossEntropyLoss"))

    def forward(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Backbone features -> (parsing [B, K, H/4, W/4], fusion [B, K, H/4, W/4], edge [B, 2, H/4, W/4])."""
        x1, x2, x3, x4 = self._transform_inputs(inputs)
        context = self.context(x4)
        up = resize(self.context_proj(context), x1.shape[-2:], self.align_corners)
        parsing_feat = self.decoder(torch.cat([up, self.skip_proj(x1)], dim=1))
        parsing = self.cls_seg(parsing_feat)
        edge, edge_feat = self.edge([x1, x2, x3])
        fusion = self.fusion(torch.cat([parsing_feat, edge_feat], dim=1))
        return parsing, fusion, edge

    def loss(self, outputs: Sequence[torch.Tensor], gt: torch.Tensor,
             edge_gt: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """``loss_decode`` on the parsing and fusion logits (keys ``parsing.<loss_name>``, ``fusion.<loss_name>``,
        with the fusion's ``acc_seg``), ``loss_edge`` on the edge logits against ``edge_gt`` ([B, H, W] 0 / 1 /
        ignore, the label's size; ``edge.<loss_name>``)."""
        if edge_gt is None:
            raise ValueError("ACE2PHead.loss needs the edge targets (edge_gt): put GenerateEdge in the training "
                             "pipeline or let ACE2PSegmentor derive them from the label map")
        parsing, fusion, edge = outputs
        out = {f"parsing.{k}": v for k, v in super().loss(parsing, gt).items() if k != "acc_seg"}
        out.update({(k if k == "acc_seg" else f"fusion.{k}"): v for k, v in super().loss(fusion, gt).items()})
        if edge_gt.dim() == 4:
            edge_gt = edge_gt.squeeze(1)
        edge = resize(edge, edge_gt.shape[-2:], self.align_corners)
        out[f"edge.{self.loss_edge.loss_name}"] = self.loss_edge(edge, edge_gt.long(), ignore_index=self.ignore_index)
        return out

    def predict(self, inputs: Sequence[torch.Tensor], size: Sequence[int]) -> torch.Tensor:
        """The fusion logits resized (bilinearly) to ``size`` (H, W)."""
        return resize(self.forward(inputs)[1], size, self.align_corners)
