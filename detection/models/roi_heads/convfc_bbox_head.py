"""Box heads with convs and fully connected layers on the RoI features (MMDetection's ``ConvFCBBoxHead``
family): ``Shared2FCBBoxHead`` is Faster / Mask / Cascade R-CNN's default."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from detection.registry import MODELS
from oars.models.layers import ConvNormAct

from .bbox_heads import BBoxHead


@MODELS.register_module()
class ConvFCBBoxHead(BBoxHead):
    """Shared convs/fcs, then per-branch convs/fcs, then ``fc_cls`` / ``fc_reg`` (MMDetection's
    ``ConvFCBBoxHead``)::

                                    /-> cls convs -> cls fcs -> fc_cls
        shared convs -> shared fcs
                                    \\-> reg convs -> reg fcs -> fc_reg

    Convs are 3x3 ``conv_out_channels`` + (norm) + ReLU, fcs ``fc_out_channels`` + ReLU. Fcs are
    Xavier-uniform initialised (MMDetection's ``init_cfg``), convs Kaiming.

    Args:
        num_shared_convs, num_shared_fcs, num_cls_convs, num_cls_fcs, num_reg_convs, num_reg_fcs: layer counts.
        conv_out_channels, fc_out_channels: widths (required where there are convs / fcs; None: not used).
        norm: norm spec of the convs (None: conv bias, no norm; ``{type: GN, num_groups: 32}`` for
            ``Shared4Conv1FCBBoxHead``'s GN variant).
        **kwargs: :class:`BBoxHead`'s arguments.
    """

    def __init__(
        self,
        num_shared_convs: int = 0,
        num_shared_fcs: int = 0,
        num_cls_convs: int = 0,
        num_cls_fcs: int = 0,
        num_reg_convs: int = 0,
        num_reg_fcs: int = 0,
        conv_out_channels: int | None = None,
        fc_out_channels: int | None = None,
        norm: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        counts = dict(num_shared_convs=num_shared_convs, num_shared_fcs=num_shared_fcs, num_cls_convs=num_cls_convs,
                      num_cls_fcs=num_cls_fcs, num_reg_convs=num_reg_convs, num_reg_fcs=num_reg_fcs)
        bad = {k: v for k, v in counts.items() if not isinstance(v, int) or v < 0}
        if bad or sum(counts.values()) == 0:
            raise ValueError(f"{type(self).__name__}: layer counts must be ints >= 0 with at least one layer, got "
                             f"{counts}")
        for key, width, used in (("conv_out_channels", conv_out_channels,
                                  num_shared_convs + num_cls_convs + num_reg_convs),
                                 ("fc_out_channels", fc_out_channels, num_shared_fcs + num_cls_fcs + num_reg_fcs)):
            if used and (not isinstance(width, int) or width < 1):
                raise ValueError(f"{type(self).__name__}: {key} must be a positive int (the head has such layers), "
                                 f"got {width!r}")
        if (num_cls_convs or num_reg_convs) and num_shared_fcs:
            raise ValueError(f"{type(self).__name__}: branch convs after shared fcs are impossible (got "
                             f"num_shared_fcs={num_shared_fcs} with cls/reg convs)")
        self.num_shared_fcs = num_shared_fcs
        self.conv_out_channels = conv_out_channels
        self.fc_out_channels = fc_out_channels
        self.norm = norm
        self.shared_convs, self.shared_fcs, last = self._branch(num_shared_convs, num_shared_fcs, self.in_channels,
                                                                True)
        self.cls_convs, self.cls_fcs, cls_dim = self._branch(num_cls_convs, num_cls_fcs, last, False)
        self.reg_convs, self.reg_fcs, reg_dim = self._branch(num_reg_convs, num_reg_fcs, last, False)
        if num_shared_fcs == 0 and not self.with_avg_pool:
            cls_dim *= self.roi_feat_area if num_cls_fcs == 0 else 1
            reg_dim *= self.roi_feat_area if num_reg_fcs == 0 else 1
        self._build_predictors(cls_dim, reg_dim)
        self.init_weights()

    def _branch(self, num_convs: int, num_fcs: int, in_dim: int, shared: bool
                ) -> tuple[nn.ModuleList, nn.ModuleList, int]:
        convs = nn.ModuleList()
        dim = in_dim
        for _ in range(num_convs):
            convs.append(ConvNormAct(dim, self.conv_out_channels, 3, norm=self.norm, act="ReLU"))
            dim = self.conv_out_channels
        fcs = nn.ModuleList()
        if num_fcs:
            if (shared or self.num_shared_fcs == 0) and not self.with_avg_pool:
                dim *= self.roi_feat_area
            for _ in range(num_fcs):
                fcs.append(nn.Linear(dim, self.fc_out_channels))
                dim = self.fc_out_channels
        return convs, fcs, dim

    def init_weights(self) -> None:
        """Kaiming (fan_out, ReLU) convs, Xavier-uniform fcs, zero biases, then :meth:`BBoxHead.init_weights`."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for fc in [*self.shared_fcs, *self.cls_fcs, *self.reg_fcs]:
            nn.init.xavier_uniform_(fc.weight)
            nn.init.zeros_(fc.bias)
        super().init_weights()

    def _run_branch(self, x: Tensor, convs: nn.ModuleList, fcs: nn.ModuleList) -> Tensor:
        for conv in convs:
            x = conv(x)
        if x.dim() > 2:
            if self.with_avg_pool:
                x = x.mean(dim=(2, 3))
            x = x.flatten(1)
        for fc in fcs:
            x = F.relu(fc(x), inplace=True)
        return x

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """RoI features ``[R, in_channels, h, w]`` -> ``(cls_score [R, num_classes + 1], bbox_pred [R, reg_dim])``."""
        self._check_input(x)
        if self.num_shared_fcs:
            x = self._run_branch(x, self.shared_convs, self.shared_fcs)
        else:
            for conv in self.shared_convs:
                x = conv(x)
        x_cls = self._run_branch(x, self.cls_convs, self.cls_fcs)
        x_reg = self._run_branch(x, self.reg_convs, self.reg_fcs)
        return self.fc_cls(x_cls), self.fc_reg(x_reg)


@MODELS.register_module()
class Shared2FCBBoxHead(ConvFCBBoxHead):
    """Faster R-CNN FPN's box head: flatten -> fc(1024) -> ReLU -> fc(1024) -> ReLU -> ``fc_cls`` / ``fc_reg``
    (torchvision's ``TwoMLPHead`` + ``FastRCNNPredictor``). Args: ``fc_out_channels`` and :class:`BBoxHead`'s."""

    def __init__(self, fc_out_channels: int, **kwargs: Any) -> None:
        super().__init__(num_shared_fcs=2, fc_out_channels=fc_out_channels, **kwargs)


@MODELS.register_module()
class Shared4Conv1FCBBoxHead(ConvFCBBoxHead):
    """Four shared 3x3 convs (MMDetection: 256) then one fc (1024) (MMDetection's GN box head with ``norm: GN``)."""

    def __init__(self, conv_out_channels: int, fc_out_channels: int, **kwargs: Any) -> None:
        super().__init__(num_shared_convs=4, num_shared_fcs=1, conv_out_channels=conv_out_channels,
                         fc_out_channels=fc_out_channels, **kwargs)
