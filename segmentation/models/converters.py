"""Map torchvision segmentation checkpoints onto oars segmentors' parameter names.

Both converters run one code path (``_convert``) over a table of regex rename rules; backbone names are
already torchvision's and stay, the auxiliary ``FCNHead`` is shared by both models.

``convert_torchvision_deeplabv3`` takes the state dict of torchvision's
``deeplabv3_resnet50`` / ``deeplabv3_resnet101`` (``backbone.*``, ``classifier.*``, ``aux_classifier.*``)
and returns one that loads with ``strict=True`` into ``EncoderDecoder(backbone=ResNet(depth=50|101,
output_stride=8), decode_head=ASPPHead(in_index=3), auxiliary_head=FCNHead(in_index=2))`` - the
``configs/_base_/models/deeplabv3_r50.yaml`` layout. Usage::

    sd = torchvision.models.segmentation.deeplabv3_resnet50(weights=...).state_dict()
    model.load_state_dict(convert_torchvision_deeplabv3(sd))

Head renames (torchvision -> oars)::

    classifier.0.convs.{0..3}.{0,1}.*   -> decode_head.aspp.convs.{0..3}.{0,1}.*   (1x1 and atrous ConvNormAct)
    classifier.0.convs.4.{1,2}.*        -> decode_head.aspp.convs.4.1.{0,1}.*      (image pooling conv, BN)
    classifier.0.project.{0,1}.*        -> decode_head.aspp.project.0.{0,1}.*
    classifier.{1,2}.*                  -> decode_head.bottleneck.{0,1}.*          (3x3 conv, BN)
    classifier.4.*                      -> decode_head.conv_seg.*
    aux_classifier.{0,1}.*              -> auxiliary_head.convs.0.{0,1}.*
    aux_classifier.4.*                  -> auxiliary_head.conv_seg.*

``convert_torchvision_fcn`` does the same for ``fcn_resnet50`` / ``fcn_resnet101`` into the
``configs/_base_/models/fcn_r50.yaml`` layout (``decode_head=FCNHead(in_index=3)``, 2048 -> 512 -> classes)::

    classifier.{0,1}.*                  -> decode_head.convs.0.{0,1}.*             (3x3 conv, BN)
    classifier.4.*                      -> decode_head.conv_seg.*
    aux_classifier.*                    -> auxiliary_head.* (as above)

A model without an auxiliary head: drop the ``auxiliary_head.*`` keys (or load with ``strict=False``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import torch

Rules = Sequence[tuple[re.Pattern[str], str]]

_BACKBONE: Rules = [(re.compile(r"^backbone\.(.+)$"), r"backbone.\1")]
_AUX_FCN: Rules = [
    (re.compile(r"^aux_classifier\.([01])\.(.+)$"), r"auxiliary_head.convs.0.\1.\2"),
    (re.compile(r"^aux_classifier\.4\.(.+)$"), r"auxiliary_head.conv_seg.\1"),
]
_DEEPLABV3_RULES: Rules = [
    *_BACKBONE,
    (re.compile(r"^classifier\.0\.convs\.([0-3])\.([01])\.(.+)$"), r"decode_head.aspp.convs.\1.\2.\3"),
    (re.compile(r"^classifier\.0\.convs\.4\.1\.(.+)$"), r"decode_head.aspp.convs.4.1.0.\1"),
    (re.compile(r"^classifier\.0\.convs\.4\.2\.(.+)$"), r"decode_head.aspp.convs.4.1.1.\1"),
    (re.compile(r"^classifier\.0\.project\.([01])\.(.+)$"), r"decode_head.aspp.project.0.\1.\2"),
    (re.compile(r"^classifier\.1\.(.+)$"), r"decode_head.bottleneck.0.\1"),
    (re.compile(r"^classifier\.2\.(.+)$"), r"decode_head.bottleneck.1.\1"),
    (re.compile(r"^classifier\.4\.(.+)$"), r"decode_head.conv_seg.\1"),
    *_AUX_FCN,
]
_FCN_RULES: Rules = [
    *_BACKBONE,
    # one conv/BN tensor name after the index (``[^.]+``), so a DeepLabV3 ``classifier.0.convs.*`` key cannot match
    (re.compile(r"^classifier\.([01])\.([^.]+)$"), r"decode_head.convs.0.\1.\2"),
    (re.compile(r"^classifier\.4\.(.+)$"), r"decode_head.conv_seg.\1"),
    *_AUX_FCN,
]


def _convert(state_dict: Mapping[str, torch.Tensor], rules: Rules, what: str) -> dict[str, torch.Tensor]:
    """Rename every key by the first matching rule; a leading ``module.`` (DataParallel) is stripped.

    Tensors are passed through unchanged (same objects). A key no rule matches raises ``KeyError`` naming
    it, rather than being silently dropped (a wrong checkpoint would otherwise load "fine" with strict=False).
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        name = key[len("module.") :] if key.startswith("module.") else key
        for pattern, repl in rules:
            if pattern.match(name):
                out[pattern.sub(repl, name)] = value
                break
        else:
            raise KeyError(
                f"{what}: unexpected key {key!r}; expected torchvision keys under backbone., classifier. "
                "or aux_classifier."
            )
    return out


def convert_torchvision_deeplabv3(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """torchvision DeepLabV3-ResNet state dict -> oars ``EncoderDecoder`` state dict (see the module doc)."""
    return _convert(state_dict, _DEEPLABV3_RULES, "convert_torchvision_deeplabv3")


def convert_torchvision_fcn(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """torchvision FCN-ResNet state dict -> oars ``EncoderDecoder`` (FCNHead decode head) state dict.

    ``classifier.0.convs...`` (a DeepLabV3 checkpoint given by mistake) matches no FCN rule and raises
    ``KeyError``, as does any other foreign key.
    """
    return _convert(state_dict, _FCN_RULES, "convert_torchvision_fcn")
