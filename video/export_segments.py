"""The export spec of a temporal action localiser, by kind: BMN (:mod:`video.export_localizer`) or C-TCN
(:mod:`video.export_ctcn`). Its own module so that the C-TCN export uses the BMN module's shared helpers without the
two importing each other."""

from __future__ import annotations

from mmengine.config import Config
from torch import nn

from oars.export.spec import ExportOptions, ExportSpec
from video.export_ctcn import build_ctcn_export_spec
from video.export_localizer import build_bmn_export_spec, localizer_kind


def build_localizer_export_spec(model: nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
    """The export spec of a BMN or a C-TCN (``localizer_kind``) with its recognizer."""
    if localizer_kind(cfg) == "ctcn":
        return build_ctcn_export_spec(model, cfg, options)
    return build_bmn_export_spec(model, cfg, options)
