"""Training-step time through oars versus a bare PyTorch loop (and torchvision), same process.

Models (``--model``):
- ``yolov3``: YOLOv3-DarkNet53 (configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml);
- ``faster_rcnn``: Faster R-CNN R50-FPN. ``--preset torchvision`` (default) builds
  faster_rcnn_r50_fpn_torchvision.yaml (short side = ``--size``, so no resize; 90 classes) and loads the weights of
  a torchvision ``FasterRCNN`` R50-FPN built as ``fasterrcnn_resnet50_fpn`` builds it for fine-tuning (frozen BN,
  conv1 + layer1 frozen, 91 outputs): both do the same work (2000 proposals per image, 512 sampled RoIs, the same
  losses); ``--preset mmdet`` builds our default faster_rcnn_r50_fpn_1x_coco.yaml (1000 proposals) instead.
- ``retinanet`` / ``fcos``: RetinaNet / FCOS R50-FPN. ``--preset torchvision`` (default) builds
  retinanet_r50_fpn_torchvision.yaml / fcos_r50_fpn_torchvision.yaml (short side = ``--size``, no resize; 90 classes)
  with the weights of a torchvision ``RetinaNet`` / ``FCOS`` built as ``retinanet_resnet50_fpn`` /
  ``fcos_resnet50_fpn`` build it for fine-tuning (frozen BN, conv1 + layer1 frozen, P6/P7 from P5, 91 outputs);
  ``--preset mmdet`` builds our default retinanet_r50_fpn_1x_coco.yaml / fcos_r50_fpn_1x_coco.yaml instead
  (MMDetection's choices, 80 classes: RetinaNet's P6 from C5 and its anchors / box coder; FCOS's points at cell
  centres, per-level scales, centre sampling), the torchvision side unchanged (its own random weights).
- ``ssd300`` / ``ssdlite``: SSD300 VGG-16 / SSDLite320 MobileNetV3-Large, ``--preset torchvision`` only
  (ssd300_vgg16_torchvision.yaml / ssdlite_mobilenetv3_320_torchvision.yaml, 90 classes) with the weights of
  torchvision's ``ssd300_vgg16`` / ``ssdlite320_mobilenet_v3_large`` (random init, every layer trainable, as
  torchvision builds them without pretrained weights; 91 outputs). Both sides resize the ``--size`` images to
  300 x 300 / 320 x 320 (default ``--size`` 300 / 320).
- ``tsm``: TSM-R50 (video ``Recognizer2D`` + ``ResNetTSM`` depth 50, 8 segments, ``TSMHead``, 400 classes, as
  MMAction2's tsm_r50_1x1x8 Kinetics-400 model); ``--batch`` clips of 8 frames at ``--size`` x ``--size``
  (its defaults, ``--size 224 --batch 1``, are the "1x8x224^2" input).
- ``bmn``: BMN (configs/_base_/models/bmn_400x100.yaml, MMAction2's bmn_400x100: 400-d features, widths 256 /
  128 / 512, 32 samples per proposal) on ``--batch`` feature sequences [400, T] with 1-3 segments each, ``--size``
  the temporal scale T = D (default 100, batch 4).
- segmentation (``EncoderDecoder``, decode + auxiliary heads, their full-size configs): ``deeplabv3``
  (DeepLabV3-R50-D8, configs/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml) and ``unet`` (U-Net S5-D16,
  unet_s5-d16_40k_voc12.yaml), default 2x512x512; ``icnet`` (ICNet R50-D8, icnet_r50-d8_80k_cityscapes.yaml),
  default 2x1024x512 (batch x H x W; ``--size HxW`` sets another, e.g. ``--size 512x1024``). Not batch 1: ICNet's
  pyramid pooling (like DeepLabV3's ASPP image pooling) normalises a 1x1 map with BatchNorm, which in training
  needs more than one value per channel (mmseg trains it with 2 images per GPU, too).

Each side trains the same batch of ``--batch`` images at ``--size`` x ``--size`` (3 boxes each; ``tsm``: clips of 8
frames with a class label; segmentation: a random label map per image, 5% of it ignore (255)):
- oars: ``model.train_step(batch, optim_wrapper)``: the data preprocessor (uint8 -> normalised, padded batch on the
  device), the loss dict parsed and logged, the optimizer wrapper's backward / step / zero_grad;
- bare: ``model(inputs, samples, mode='loss')`` on the pre-processed batch, the sum of the ``loss`` entries (all
  heads), ``backward()``, ``step()``, ``zero_grad()``: the same module without the framework;
- torchvision (the detectors with a torchvision preset: Faster R-CNN, RetinaNet, FCOS, SSD300, SSDLite):
  ``tv_model(images, targets)`` (its own transform included) on the same images as [0, 1] floats, the labels + 1
  (torchvision's 0 is the background), ``sum().backward()``, ``step()``, ``zero_grad()``.
Runs alternate (bare, oars[, torchvision], bare, ...) so that drift in machine speed hits all. Prints the medians and
the ratios oars / bare (goal <= 1.05) and oars / torchvision (goal <= 1.0).

- GANs (``pix2pix``, ``cyclegan``: their full-size configs, default 1x256x256): see benchmarks/gan_step.py.

    python benchmarks/train_step.py [--model yolov3|faster_rcnn|retinanet|fcos|ssd300|ssdlite|tsm|deeplabv3|unet|
                                             icnet|pix2pix|cyclegan]
        [--preset torchvision|mmdet]
        [--repeats 10] [--warmup 2] [--device cpu|cuda] [--size 320 | HxW] [--batch 2]
        (tsm: --size 224 --batch 1; bmn: --size 100 (T) --batch 4; deeplabv3/unet: 512 and 2; icnet: 1024x512
         and 2; ssd300: 300 and 2; ssdlite: 320 and 2, by default)

The cheapest run, to check that it works: ``--model unet --size 32 --repeats 1 --warmup 1``; tests build every
``--model`` / ``--preset`` choice through :func:`build_steps` at a tiny size.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT, print_step_times, time_alternating  # noqa: E402
from benchmarks.gan_step import GAN_CONFIGS, gan_steps  # noqa: E402
from benchmarks.torchvision_steps import torchvision_step  # noqa: E402

CONFIGS = {
    "yolov3": os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_270e_coco.yaml"),
    "faster_rcnn/torchvision": os.path.join(ROOT, "configs/_base_/models/faster_rcnn_r50_fpn_torchvision.yaml"),
    "faster_rcnn/mmdet": os.path.join(ROOT, "configs/detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml"),
    "retinanet/torchvision": os.path.join(ROOT, "configs/_base_/models/retinanet_r50_fpn_torchvision.yaml"),
    "retinanet/mmdet": os.path.join(ROOT, "configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml"),
    "fcos/torchvision": os.path.join(ROOT, "configs/_base_/models/fcos_r50_fpn_torchvision.yaml"),
    "fcos/mmdet": os.path.join(ROOT, "configs/detection/fcos/fcos_r50_fpn_1x_coco.yaml"),
    "ssd300/torchvision": os.path.join(ROOT, "configs/_base_/models/ssd300_vgg16_torchvision.yaml"),
    "ssdlite/torchvision": os.path.join(ROOT, "configs/_base_/models/ssdlite_mobilenetv3_320_torchvision.yaml"),
    "deeplabv3": os.path.join(ROOT, "configs/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml"),
    "unet": os.path.join(ROOT, "configs/segmentation/unet/unet_s5-d16_40k_voc12.yaml"),
    "icnet": os.path.join(ROOT, "configs/segmentation/icnet/icnet_r50-d8_80k_cityscapes.yaml"),
    "bmn": os.path.join(ROOT, "configs/_base_/models/bmn_400x100.yaml"),
}
# segmentation models: default (batch, H, W)
SEG_DEFAULTS = {"deeplabv3": (2, 512, 512), "unet": (2, 512, 512), "icnet": (2, 1024, 512)}
NAMES = {"yolov3": "YOLOv3-DarkNet53", "faster_rcnn/torchvision": "Faster R-CNN R50-FPN (torchvision preset)",
         "faster_rcnn/mmdet": "Faster R-CNN R50-FPN (MMDetection preset)",
         "retinanet/torchvision": "RetinaNet R50-FPN (torchvision preset)",
         "retinanet/mmdet": "RetinaNet R50-FPN (MMDetection preset)",
         "fcos/torchvision": "FCOS R50-FPN (torchvision preset)", "fcos/mmdet": "FCOS R50-FPN (MMDetection preset)",
         "ssd300/torchvision": "SSD300 VGG-16 (torchvision preset)",
         "ssdlite/torchvision": "SSDLite320 MobileNetV3-Large (torchvision preset)", "tsm": "TSM-R50 (1x1x8 segments)",
         "deeplabv3": "DeepLabV3-R50-D8", "unet": "U-Net S5-D16", "icnet": "ICNet R50-D8",
         "bmn": "BMN (400-d features)"}
# the detectors compared with torchvision too: --preset choices (the first is the default)
PRESETS = {"faster_rcnn": ("torchvision", "mmdet"), "retinanet": ("torchvision", "mmdet"),
           "fcos": ("torchvision", "mmdet"), "ssd300": ("torchvision",), "ssdlite": ("torchvision",)}
# SSD: the fixed size its preprocessor (and torchvision's transform) resizes every image to; the default --size
SSD_SIZES = {"ssd300": 300, "ssdlite": 320}
TSM_SEGMENTS = 8
# TSM-R50 as MMAction2's tsm_imagenet-pretrained-r50_8xb16-1x1x8-50e_kinetics400-rgb (ImageNet weights aside)
TSM_MODEL = dict(
    type="Recognizer2D",
    num_classes=400,
    data_preprocessor=dict(type="ActionDataPreprocessor", mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, format_shape="NCHW"),
    backbone=dict(type="ResNetTSM", depth=50, num_segments=TSM_SEGMENTS, norm_eval=False),
    cls_head=dict(type="TSMHead", dropout_ratio=0.5, average_clips="prob"),
)


def make_batch(size: int, batch: int, num_classes: int):
    """``batch`` uint8 images with 3 boxes each, as the data loader delivers them."""
    from mmengine.structures import InstanceData

    from detection.structures import DetDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g))
        xy = torch.rand(3, 2, generator=g) * size * 0.6
        wh = torch.rand(3, 2, generator=g) * size * 0.3 + 16
        s = DetDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1.0, 1.0)))
        s.gt_instances = InstanceData(bboxes=torch.cat([xy, xy + wh], 1),
                                      labels=torch.randint(0, num_classes, (3,), generator=g))
        s.ignored_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long))
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def make_clips(size: int, batch: int, num_classes: int):
    """``batch`` uint8 clips [8, 3, size, size] (BGR, as ``PackActionInputs`` delivers them) with a class label."""
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 256, (TSM_SEGMENTS, 3, size, size), dtype=torch.uint8, generator=g)
              for _ in range(batch)]
    labels = torch.randint(0, num_classes, (batch,), generator=g).tolist()
    samples = [ActionDataSample(metainfo=dict(img_shape=(size, size))).set_gt_label(label) for label in labels]
    return {"inputs": inputs, "data_samples": samples}


def make_features(tscale: int, batch: int, feat_dim: int):
    """``batch`` float32 feature sequences [feat_dim, tscale] with 1-3 segments each (``gt_bbox`` normalised
    [N, 2]), as ``PackLocalizationInputs`` delivers them."""
    from video.structures import ActionDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randn(feat_dim, tscale, generator=g))
        n = int(torch.randint(1, 4, (1,), generator=g))
        start = torch.rand(n, generator=g) * 0.7
        s = ActionDataSample(metainfo=dict(duration_second=60.0, feature_second=60.0))
        s.gt_bbox = torch.stack([start, start + 0.05 + torch.rand(n, generator=g) * 0.25], dim=1)
        s.gt_labels = torch.zeros(n, dtype=torch.int64)
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def make_seg_batch(height: int, width: int, batch: int, num_classes: int):
    """``batch`` uint8 images [3, height, width] with a random label map each (uint8 [1, H, W] class ids, about 5%
    ignore = 255), as ``PackSegInputs`` delivers them. Random labels: the step's work does not depend on them."""
    from mmengine.structures import PixelData

    from segmentation.structures import SegDataSample

    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=g))
        label = torch.randint(0, num_classes, (1, height, width), dtype=torch.uint8, generator=g)
        label[torch.rand(1, height, width, generator=g) < 0.05] = 255
        shape = (height, width)
        s = SegDataSample(metainfo=dict(img_shape=shape, ori_shape=shape))
        s.gt_sem_seg = PixelData(data=label)
        samples.append(s)
    return {"inputs": inputs, "data_samples": samples}


def parse_size(text: str) -> tuple[int, int]:
    """``"320"`` -> (320, 320); ``"1024x512"`` -> (H, W) = (1024, 512)."""
    parts = text.lower().split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--size must be N or HxW with positive ints, got {text!r}")
    return (values[0], values[-1])


def build_tsm(device: str):
    """The TSM-R50 recognizer (train mode) and its model config."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, DefaultScope

    import video.models  # noqa: F401  (registers the video models)

    cfg = Config(dict(model=copy.deepcopy(TSM_MODEL)))
    with DefaultScope.overwrite_default_scope("video"):
        model = MODELS.build(copy.deepcopy(cfg.model))
    return model.to(device).train(), cfg


def build_oars(key: str, size: int, device: str):
    """The oars model (train mode) and its config (detection or segmentation, the config's default scope)."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    # the torchvision presets are model presets (configs/_base_/models), not full configs: they set no default_scope;
    # 90 classes = torchvision's 91 outputs less the background; R-CNN / dense: short side = size (no resize)
    resize = [f"model.data_preprocessor.min_size={size}"]
    tv_preset = ["default_scope=detection", "model.num_classes=90"]
    overrides = {
        "yolov3": ["model.data_preprocessor.batch_augments=null"],
        "faster_rcnn/torchvision": tv_preset + resize,
        "retinanet/torchvision": tv_preset + resize,
        "fcos/torchvision": tv_preset + resize,
        "ssd300/torchvision": tv_preset,
        "ssdlite/torchvision": tv_preset,
        "bmn": ["default_scope=video", f"model.tscale={size}", f"model.dscale={size}"],
    }.get(key, [])
    cfg = load_config(CONFIGS[key], overrides)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model))
    return model.to(device).train(), cfg


MODEL_CHOICES = ["yolov3", *PRESETS, "tsm", "bmn", *SEG_DEFAULTS, *GAN_CONFIGS]
STEP_LABELS = {"bare": "bare PyTorch loop", "oars": "oars train_step", "torchvision": "torchvision model"}
GOALS = {"bare": 1.05, "torchvision": 1.0}


def default_shape(model: str) -> tuple[tuple[int, int], int]:
    """The model's default ((H, W), batch): what ``--size`` and ``--batch`` fall back to."""
    if model in SEG_DEFAULTS:
        batch, height, width = SEG_DEFAULTS[model]
        return (height, width), batch
    if model in GAN_CONFIGS:
        return (256, 256), 1
    if model in SSD_SIZES:
        return (SSD_SIZES[model], SSD_SIZES[model]), 2
    if model == "bmn":
        return (100, 100), 4
    return ((224, 224), 1) if model == "tsm" else ((320, 320), 2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--size`` / ``--batch`` resolved to the model's defaults when not given.

    Args:
        argv: the arguments (None: ``sys.argv[1:]``).

    Returns:
        The namespace; ``size`` is (H, W) and ``batch`` an int. HxW sizes are refused for the models that take
        square inputs only, and a ``--preset`` a detector does not have (argparse's usage error, exit status 2).
    """
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=MODEL_CHOICES, default="yolov3")
    parser.add_argument("--preset", choices=["torchvision", "mmdet"], default="torchvision",
                        help="the detectors compared with torchvision: which oars preset (see above; "
                             "ssd300 / ssdlite: torchvision only)")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps of each side (at least 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps of each side first (at least 1)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=parse_size, default=None,
                        help="N (square) or HxW (segmentation); default 320 (tsm: 224; bmn: T = 100; "
                             "deeplabv3/unet: 512; icnet: 1024x512; pix2pix/cyclegan: 256; ssd300: 300; ssdlite: 320)")
    parser.add_argument("--batch", type=int, default=None,
                        help="images, tsm clips or bmn feature sequences; default 2 (tsm, GANs: 1; bmn: 4)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.batch is not None and args.batch < 1:
        parser.error(f"--repeats and --batch must be at least 1, got {args.repeats} and {args.batch}")
    size, batch = default_shape(args.model)
    if args.size is None:
        args.size = size
    elif args.model not in SEG_DEFAULTS and args.size[0] != args.size[1]:
        parser.error(f"--size {args.size[0]}x{args.size[1]}: only the segmentation models take HxW")
    if args.batch is None:
        args.batch = batch
    if args.model in PRESETS and args.preset not in PRESETS[args.model]:
        parser.error(f"--model {args.model} has the presets {', '.join(PRESETS[args.model])}, not {args.preset}")
    return args


def build_steps(model: str, preset: str, size: tuple[int, int], batch: int,
                device: str) -> tuple[dict[str, Callable[[], None]], str]:
    """The compared training steps on one shared batch, and the case's title (model, input shape, device).

    One function for every ``--model`` / ``--preset`` choice, so that a test can build and run each at a tiny
    size exactly as ``main`` does (a choice whose config cannot be built fails there, not in front of a user).

    Args:
        model: a ``--model`` choice.
        preset: the ``--preset`` choice (the detectors of :data:`PRESETS` only; ignored by the others).
        size: (H, W) of the images (square except for the segmentation models).
        batch: images (or clips) per step.
        device: ``cpu`` or ``cuda``.

    Returns:
        ``({'bare': ..., 'oars': ...[, 'torchvision': ...]}, title)``.
    """
    torch.manual_seed(0)
    if model in GAN_CONFIGS:
        return gan_steps(model, size[0], batch, device)
    from mmengine.optim import OptimWrapper

    height, width = size
    key = f"{model}/{preset}" if model in PRESETS else model
    net, cfg = build_tsm(device) if key == "tsm" else build_oars(key, height, device)
    if model in SEG_DEFAULTS:
        data = make_seg_batch(height, width, batch, cfg.model.num_classes)
    elif key == "bmn":
        data = make_features(height, batch, cfg.model.feat_dim)
    else:
        data = (make_clips if key == "tsm" else make_batch)(height, batch, cfg.model.num_classes)
    opt = torch.optim.SGD(net.parameters(), lr=1e-5, momentum=0.9, weight_decay=5e-4)
    wrapper = OptimWrapper(opt)
    prepared = net.data_preprocessor(copy.deepcopy(data), training=True)
    inputs, samples = prepared["inputs"], prepared["data_samples"]

    def bare() -> None:
        losses = net(inputs, samples, mode="loss")
        # every entry named *loss* (all heads), as mmengine's parse_losses sums them on the oars side
        total = sum(v for k, v in losses.items() if "loss" in k)
        total.backward()
        opt.step()
        opt.zero_grad()

    def oars() -> None:
        net.train_step(data, wrapper)

    steps = {"bare": bare, "oars": oars}
    if model in PRESETS:
        steps["torchvision"] = torchvision_step(model, net, data, height, device,
                                                same_weights=preset == "torchvision")
    frames = f"x{TSM_SEGMENTS}" if key == "tsm" else ""
    shape = f"{batch}{frames}x{height}x{width}"
    if key == "bmn":
        shape = f"{batch}x{cfg.model.feat_dim}x{height} (T = D = {height})"
    elif tuple(inputs.shape[-2:]) != (height, width):
        how = "resized" if model in SSD_SIZES else "padded"
        shape += f" ({how} to {inputs.shape[-2]}x{inputs.shape[-1]})"
    return steps, f"{NAMES[key]}, {shape}, {device}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    steps, title = build_steps(args.model, args.preset, args.size, args.batch, args.device)
    try:
        medians = time_alternating(steps, args.repeats, args.device, args.warmup)
    except ValueError as err:
        if "Expected more than 1 value per channel" not in str(err):
            raise
        raise SystemExit(f"{title}: a BatchNorm layer sees one value per channel in training (a global-pooling "
                         f"branch at batch 1); use --batch 2 or more ({err})") from None
    print(f"{title}, {args.repeats} steps each (torch threads {torch.get_num_threads()})")
    print_step_times(medians, STEP_LABELS, args.device, GOALS)


if __name__ == "__main__":
    main()
