"""torchvision's own detectors and their training step, the reference ``benchmarks/train_step.py`` compares the
oars step with (same batch; the same weights under the torchvision preset)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def build_torchvision(model: str, size: int, device: str) -> torch.nn.Module:
    """torchvision's detector ``model`` (a key of :data:`PRESETS`, train mode, random weights, 91 outputs).

    Faster R-CNN / RetinaNet / FCOS R50-FPN as ``fasterrcnn_resnet50_fpn`` / ``retinanet_resnet50_fpn`` /
    ``fcos_resnet50_fpn`` build them for fine-tuning (frozen BN, trainable layers 3; RetinaNet and FCOS: C3-C5 and
    P6/P7 from P5), images not resized (short side = ``size``). SSD300 / SSDLite320 as ``ssd300_vgg16`` /
    ``ssdlite320_mobilenet_v3_large`` build them without pretrained weights (every layer trainable; SSDLite's
    reduced tail), images resized to 300 x 300 / 320 x 320. Nothing is downloaded.
    """
    from torchvision.models import detection
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    from torchvision.ops.misc import FrozenBatchNorm2d

    if model == "ssd300":
        tv = detection.ssd300_vgg16(weights=None, weights_backbone=None, num_classes=91)
    elif model == "ssdlite":
        tv = detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=91)
    elif model == "faster_rcnn":
        backbone = resnet_fpn_backbone(backbone_name="resnet50", weights=None, norm_layer=FrozenBatchNorm2d,
                                       trainable_layers=3)
        tv = detection.FasterRCNN(backbone, num_classes=91, min_size=size, max_size=1333)
    elif model in ("retinanet", "fcos"):
        backbone = resnet_fpn_backbone(backbone_name="resnet50", weights=None, norm_layer=FrozenBatchNorm2d,
                                       trainable_layers=3, returned_layers=[2, 3, 4],
                                       extra_blocks=LastLevelP6P7(256, 256))
        cls = detection.RetinaNet if model == "retinanet" else detection.FCOS
        tv = cls(backbone, num_classes=91, min_size=size, max_size=1333)
    else:
        raise ValueError(f"no torchvision counterpart for {model!r}; expected faster_rcnn, retinanet, fcos, ssd300 "
                         "or ssdlite")
    return tv.to(device).train()


def torchvision_step(name: str, model: torch.nn.Module, data: dict, size: int, device: str,
                     same_weights: bool) -> Callable[[], None]:
    """torchvision's training step of the detector ``name`` on the same images (as [0, 1] RGB floats) and boxes.

    Args:
        name: a key of ``benchmarks.train_step.PRESETS`` (which torchvision model, see :func:`build_torchvision`).
        model: the oars detector; with ``same_weights`` it gets the torchvision model's weights (converted with
            ``classes='all'``: the same proposals / matches / hard negatives, the same work on both sides).
        data: the batch the oars side trains on.
        size: the images' side (torchvision's ``min_size`` for the R50-FPN detectors: no resize).
        device: where both models run.
        same_weights: load the torchvision weights into ``model`` (the torchvision preset).
    """
    from detection.models import convert_torchvision as conv
    from detection.models import convert_torchvision_onestage as onestage

    tv = build_torchvision(name, size, device)
    if same_weights:
        convert = {"faster_rcnn": conv.rcnn_from_torchvision, "ssd300": onestage.ssd_from_torchvision,
                   "ssdlite": onestage.ssd_from_torchvision}.get(name, onestage.dense_from_torchvision)
        model.load_state_dict(convert(tv.state_dict(), "all"), strict=True)
    tv_opt = torch.optim.SGD([p for p in tv.parameters() if p.requires_grad], lr=1e-5, momentum=0.9,
                             weight_decay=5e-4)
    images = [img.flip(0).float().div(255).to(device) for img in data["inputs"]]  # BGR -> RGB [0, 1]
    targets = [dict(boxes=s.gt_instances.bboxes.to(device), labels=(s.gt_instances.labels + 1).to(device))
               for s in data["data_samples"]]

    def step() -> None:
        losses = tv(images, targets)
        sum(losses.values()).backward()
        tv_opt.step()
        tv_opt.zero_grad()

    return step
