"""The exact full-size parameter count of every top-level config in configs/, each tied to a cited source.

Building a config at full size proves that it resolves, not that it is the model it claims to be: Faster R-CNN
with 512-d box FCs, TSM on ResNet-101 or NeXtVLAD with a 1024-wide hidden layer all build. An exact count per
config catches such drift; the source next to it says which number the count was checked against, so a changed
count is a question for the author ("did the architecture change, and does it still match its source?") rather
than a number to paste in.

tests/test_configs.py calls ``check_size`` on the full-size model it already builds (no second build). A new
config fails there until it has an entry here.

An entry's ``published`` is the source's number for the source's own model: from torchvision's weights meta
(``num_params``, recomputable in-process with ``weights=None``), a model zoo, a reference implementation's
layer layout counted by hand, or, where only our layout exists (demos), our own hand count. ``differs`` says
why ``params`` is not ``published`` (class count, a stem variant, ...). Shorthand in the hand counts:
``conv(a, b, k)`` is a bias-free k x k convolution a -> b (a*b*k*k), ``+BN`` its batch norm (2 per output
channel), ``fc(a, b)`` a linear layer or 1x1 convolution with bias (a*b + b).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Size:
    """What one config's full-size model must count, and against what that count was checked."""

    params: int  # exact sum(p.numel() for p in model.parameters()) of our full-size build
    published: int  # the source's number for the source's own model
    source: str  # where ``published`` comes from
    differs: str = ""  # why params != published; empty when they agree

    @property
    def cite(self) -> str:
        """The source without its breakdown (the text before the first ': ' outside parentheses), short enough
        for a failure message."""
        depth = 0
        for i, char in enumerate(self.source):
            depth += (char == "(") - (char == ")")
            if depth == 0 and self.source.startswith(": ", i):
                return self.source[:i]
        return self.source


DEMO = "hand count / this repo's demo"

# Shared pieces of the hand counts (the ResNet trunks are torchvision's own models, counted in-process).
R50 = "ResNet-50 trunk 23,508,032 (torchvision resnet50 25,557,032 less its fc 2048*1000+1000)"
R101 = "ResNet-101 trunk 42,500,160 (torchvision resnet101 44,549,160 less its fc 2048*1000+1000)"
TV_FASTER = "torchvision fasterrcnn_resnet50_fpn weights meta (FrozenBatchNorm trunk, 91 COCO ids incl. background)"
TV_MASK = "torchvision maskrcnn_resnet50_fpn weights meta (FrozenBatchNorm trunk, 91 COCO ids incl. background)"
COCO80 = ("torchvision scores 91 classes and regresses 91*4 box outputs, ours 80 + background and 80*4: "
          "1025*(91+364) - 1025*(81+320) = 55,350 fewer")
BOX_HEAD = ("box head fc(256*7*7, 1024) + fc(1024, 1024) + cls fc(1024, 81) + class-specific reg fc(1024, 320) "
            "14,306,705")
CASCADE_HEAD = "fc(256*7*7, 1024) + fc(1024, 1024) + cls fc(1024, 81) + class-agnostic reg fc(1024, 4) = 13,982,805"
MASK_HEAD = "4 conv(256, 256, 3)+bias, deconv 256*256*4+256, logits fc(256, 80) = 2,643,280"
FT3_BOX = ("3 classes (the fine-tuning recipes' demo shapes): box cls fc(1024, 4) + reg fc(1024, 12) 16,400 instead "
           "of torchvision's fc(1024, 91) + fc(1024, 364) 466,375")
TV_RETINA = "torchvision retinanet_resnet50_fpn weights meta (FrozenBatchNorm trunk, 91 COCO ids)"
TV_FCOS = "torchvision fcos_resnet50_fpn weights meta (FrozenBatchNorm trunk, 91 COCO ids)"
TV_SSD = ("torchvision ssd300_vgg16 weights meta (91 COCO ids incl. background; MMDetection's SSD300 layout counts "
          "the same 34,305,206 by hand: VGG trunk 14,714,688 + L2Norm 512 + fc6 4,719,616 + fc7 1,049,600 + extras "
          "2,459,520 + class convs 10,826,622 + box convs 534,648)")
SSD_COCO80 = ("81 class outputs instead of 91: 10 * 133,662 = 1,336,620 fewer (133,662 = sum over the six levels of "
              "(in_channels * 9 + 1) * anchors per location)")
TV_SSDLITE = "torchvision ssdlite320_mobilenet_v3_large weights meta (91 COCO ids incl. background)"
SSDLITE_COCO80 = ("81 class outputs instead of 91: 10 * 6 * (672 + 480 + 512 + 256 + 256 + 128 + 6) = 138,600 "
                  "fewer depthwise-separable class-head parameters")
ASPP_R = ("separable ASPP at 256 channels on 2048 (image pool and 1x1 branch 524,800 each, 3 atrous depthwise "
          "2048*9+BN + pointwise 2048->256+BN 547,328 each, 1x1 projection 1280->256+BN 328,192) 3,019,776")
DLV3P_DECODER = ("low-level conv(256, 48, 1)+BN 12,384, two separable 3x3 convs 304->256, 256->256 150,544, "
                 "cls fc(256, C)")
AUX_1024 = "aux FCN conv(1024, 256, 3)+BN + fc(256, C)"
PSP_HEAD = "PPM 4 x (conv(2048, 512, 1)+BN) 4,198,400 + bottleneck conv(4096, 512, 3)+BN 18,875,392 + fc(512, C)"
ACE2P_R101 = ("hand count of AugmentCE2P (GoGoDuck912/Self-Correction-Human-Parsing networks/AugmentCE2P.py, written "
              "out in tests/segmentation/test_ace2p_parts.py): deep-stem ResNet-101 42,623,936 (" + R101 + ", less the "
              "7x7 stem 9,536, plus the deep stem 112,832 and layer1 fed 128 channels 20,480) + context 23,073,792 + "
              "decoder 288,352 + fc(256, C) + edge 464,912 + fusion conv(1024, 256, 1)+BN 262,656 + fc(256, C)")
CYCLEGAN_REPO = "junyanz/pytorch-CycleGAN-and-pix2pix networks.py layout counted by hand"
ATT_D = ("D: 5 conv(64..1024, 4)+norm 11,148,160, adv fc(1024*4*4, 1024) + fc(1024, 1) 16,779,265, "
         "cls fc(1024*4*4, 1024) + fc(1024, 13) 16,791,565")
ATT_ENC = "enc 5 conv(3->64 .. 512->1024, 4)+BN 11,148,160"
YT8M_LOGITS = "fc(4096, 3862) 15,822,614"
TSN_R50 = ("hand count of MMAction2's tsn_r50 (its model zoo gives 24.33M at 400 classes): " + R50
           + " + fc(2048, 400) 819,600")
TSM_R50 = ("hand count of MMAction2's tsm_r50 (the shift has no parameters: TSN's 24.33M in its model zoo): " + R50
           + " + fc(2048, 400) 819,600")

SIZES: dict[str, Size] = {
    # ---- detection
    "detection/cacascade_rcnn/cacascade_rcnn_se154_vd_dcnv2_fpn_gn_obj365.yaml": Size(
        169_217_226, 169_217_226,
        "hand count of PaddleDetection's cascade_rcnn_dcnv2_se154_vd_fpn_gn_cas (Objects365 v1: 365 classes + "
        "background; Paddle states no size; tests/oars/models/test_backbones_vd.py counts the trunk layer by layer): "
        "SENet-154 trunk 113,039,984 (Cadene's senet154 115,088,984 less its fc 2048*1000+1000) less its BN 247,552 "
        "(frozen BN has no parameters) + DCNv2 offset convs in C3-C5 fc(w/2*9, 27) 8 x 62,235 + 36 x 124,443 + 3 x "
        "248,859 = 5,724,405: 118,516,837; GN FPN laterals conv(256/512/1024/2048, 256, 1) 983,040 + 4 "
        "conv(256, 256, 3) 2,359,296 + 8 GN 4,096: 3,346,432; RPN 593,935; 3 stages of 4 conv(256, 256, 3)+GN "
        "2,361,344 + fc(256*7*7, 1024) 12,846,080 + cls fc(1024, 366) 375,150 + class-agnostic reg fc(1024, 4) 4,100 "
        "= 15,586,674"),
    "detection/cacascade_rcnn/cacascade_rcnn_r101_vd_fpn_1x_coco.yaml": Size(
        89_272_354, 89_272_354,
        "hand count of PaddleDetection cascade_rcnn_cls_aware_r101_vd_fpn (Paddle states no size): our Cascade "
        "R-CNN R50-FPN 69,341,646 (below) + ResNet-101's 17 more stage-3 bottlenecks, each conv(1024, 256, 1) + "
        "conv(256, 256, 3) + conv(256, 1024, 1) = 1,114,112 (frozen BN: no parameters) = 18,939,904 + the vd deep "
        "stem conv(3, 32, 3) + conv(32, 32, 3) + conv(32, 64, 3) 28,512 less the 7x7 stem's 9,408 = 19,104 + "
        "class-specific regression in 3 stages, fc(1024, 320) instead of fc(1024, 4): 3 * 323,900 = 971,700"),
    "detection/cacascade_rcnn/cacascade_rcnn_r18_fpn_demo_shapes.yaml": Size(
        3_522_255, 3_522_255,
        f"{DEMO}: ResNet-18 at base_channels 16 702,096 + FPN 64 ch 163,328 + RPN conv 36,928 + 3 anchors cls 195 + "
        "reg 780 (= 903,327) + 3 stages of box head fc(64*7*7, 256) + fc(256, 256) + fc(256, 4) + class-specific "
        "fc(256, 12) 872,976"),
    "detection/cascade_rcnn/cascade_mask_rcnn_r50_fpn_1x_coco.yaml": Size(
        77_271_486, 77_271_486,
        "hand count of MMDetection cascade-mask-rcnn_r50_fpn: our Faster R-CNN R50-FPN 41,699,936 (pinned to "
        f"torchvision below) less its {BOX_HEAD}, plus 3 stages of {CASCADE_HEAD} and 3 mask heads of {MASK_HEAD}"),
    "detection/cascade_rcnn/cascade_rcnn_r50_fpn_1x_coco.yaml": Size(
        69_341_646, 69_341_646,
        "hand count of MMDetection cascade-rcnn_r50_fpn: our Faster R-CNN R50-FPN 41,699,936 (pinned to "
        f"torchvision below) less its {BOX_HEAD}, plus 3 stages of {CASCADE_HEAD}"),
    "detection/faster_rcnn/faster_rcnn_r50_c4_1x_coco.yaml": Size(
        33_791_644, 33_791_644,
        "hand count of MMDetection faster-rcnn_r50-caffe-c4 (frozen BN, so no BN parameters): stem + res2-res4 convs "
        "8,512,704, RPN conv(1024, 1024, 3)+bias 9,438,208 + 15 anchors cls 15,375 + reg 61,500, shared res5 "
        "14,942,208, box head fc(2048, 81) + fc(2048, 320) 821,649"),
    "detection/faster_rcnn/faster_rcnn_r50_fpn_1x_coco.yaml": Size(41_699_936, 41_755_286, TV_FASTER, COCO80),
    "detection/faster_rcnn/faster_rcnn_r50_fpn_1x_voc0712.yaml": Size(
        41_392_436, 41_755_286, TV_FASTER,
        "20 classes: 1025*(91+364) - 1025*(21+80) = 362,850 fewer box-predictor parameters"),
    "detection/faster_rcnn/faster_rcnn_r50_fpn_torchvision_coco.yaml": Size(41_699_936, 41_755_286, TV_FASTER, COCO80),
    "detection/faster_rcnn/faster_rcnn_r50_fpn_finetune_demo_shapes.yaml": Size(
        41_305_311, 41_755_286, TV_FASTER, FT3_BOX),
    "detection/faster_rcnn/faster_rcnn_r50_fpn_finetune_demo_shapes_cpu.yaml": Size(
        41_305_311, 41_755_286, TV_FASTER,  # the same model as faster_rcnn_r50_fpn_finetune_demo_shapes
        FT3_BOX),
    "detection/faster_rcnn/faster_rcnn_r50_vd_fpn_2x_coco.yaml": Size(
        41_719_040, 41_755_286, TV_FASTER,
        f"{COCO80}; ResNet-vd's deep stem conv(3, 32, 3) + conv(32, 32, 3) + conv(32, 64, 3) = 28,512 replaces "
        "the 7x7 stem's 9,408 (+19,104; BN frozen, avg-pool shortcuts have no parameters)"),
    "detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml": Size(
        1_808_242, 1_808_242,
        f"{DEMO}: ResNet-18 at base_channels 16 702,096 + FPN 64 ch 163,328 + RPN conv 36,928 + 3 anchors "
        "cls 195 + reg 780 + box head fc(64*7*7, 256) + fc(256, 256) + fc(256, 4) + fc(256, 12) 872,976 + mask "
        "head conv(64, 32, 3) + conv(32, 32, 3) + deconv + fc(32, 3) 31,939"),
    "detection/mask_rcnn/mask_rcnn_r50_fpn_1x_coco.yaml": Size(
        44_343_216, 44_401_393, TV_MASK, f"{COCO80}, and mask logits fc(256, 80) vs fc(256, 91): 2,827 fewer"),
    "detection/mask_rcnn/mask_rcnn_r50_fpn_torchvision_coco.yaml": Size(
        44_343_216, 44_401_393, TV_MASK, f"{COCO80}, and mask logits fc(256, 80) vs fc(256, 91): 2,827 fewer"),
    "detection/mask_rcnn/mask_rcnn_r50_fpn_finetune_demo_shapes.yaml": Size(
        43_928_802, 44_401_393, TV_MASK, f"{FT3_BOX}; mask logits fc(256, 3) 771 instead of fc(256, 91) 23,387"),
    "detection/mask_rcnn/mask_rcnn_r50_fpn_finetune_demo_shapes_cpu.yaml": Size(
        43_928_802, 44_401_393, TV_MASK,  # the same model as mask_rcnn_r50_fpn_finetune_demo_shapes
        f"{FT3_BOX}; mask logits fc(256, 3) 771 instead of fc(256, 91) 23,387"),
    "detection/yolov3/yolov3_darknet53_270e_coco.yaml": Size(
        61_949_149, 61_949_149,
        "pjreddie's yolov3.weights (Redmon & Farhadi 2018, COCO): 248,007,048 bytes = 20-byte header + "
        "62,001,757 float32 (AlexeyAB/darknet#1910), less 2*26,304 BN running means/variances"),
    "detection/yolov3/yolov3_darknet53_270e_voc.yaml": Size(
        61_626_049, 61_949_149, "pjreddie's yolov3.weights (see yolov3_darknet53_270e_coco)",
        "20 classes: the three 1x1 output convs (1024/512/256 in, 3 anchors) lose 3*60 outputs each: "
        "180*(1025+513+257) = 323,100 fewer"),
    "detection/yolov3/yolov3_darknet53_demo_shapes.yaml": Size(
        3_859_952, 3_859_952,
        f"{DEMO}: DarkNet-53 at base_channels 8 2,543,416 + neck (half the backbone's channels) 921,856 + "
        "head 394,680 (3 classes; 1/3/3 anchors per level)"),
    "detection/yolov3/yolov3_mobilenet_v3_270e_coco.yaml": Size(
        23_608_237, 23_608_237,
        "hand count of PaddleDetection yolov3_mobilenet_v3_large_270e_coco's layout: YOLOv3FPN at fixed "
        "512/256/128 widths (neck 14,137,344), 3x3 tip + 1x1 output per level (head 6,654,461), on our "
        "MobileNetV3-large trunk 2,816,432 (torchvision mobilenet_v3_large.features less its last 1x1 conv)"),
    "detection/yolov3/yolov3_r50vd_270e_coco.yaml": Size(
        45_579_613, 45_579_613,
        "hand count of PaddleDetection yolov3_r50vd_dcn_270e_coco's layout without the deformable convs: "
        "YOLOv3FPN at fixed 512/256/128 widths (neck 15,397,888, head 6,654,461) on our ResNet-50-vd trunk "
        "23,527,264"),
    "detection/retinanet/retinanet_r50_fpn_1x_coco.yaml": Size(
        37_915_572, 34_014_999, TV_RETINA,
        "80 classes instead of 91: -9*11*2305 = -228,195; P6 from C5 (MMDetection's add_extra_convs on_input) "
        "instead of P5: +(2048-256)*256*9 = +4,128,768"),
    "detection/retinanet/retinanet_r50_fpn_torchvision_coco.yaml": Size(
        33_786_804, 34_014_999, TV_RETINA, "80 classes instead of 91: -9*11*2305 = -228,195"),
    "detection/retinanet/retinanet_r50_fpn_finetune_demo_shapes.yaml": Size(
        32_189_439, 34_014_999, TV_RETINA,
        "3 classes: cls_logits conv(256, 9*3, 3)+bias 62,235 instead of 9*91 outputs 1,887,795"),
    "detection/retinanet/retinanet_r50_fpn_finetune_demo_shapes_cpu.yaml": Size(
        32_189_439, 34_014_999, TV_RETINA,  # the same model as retinanet_r50_fpn_finetune_demo_shapes
        "3 classes: cls_logits conv(256, 9*3, 3)+bias 62,235 instead of 9*91 outputs 1,887,795"),
    "detection/fcos/fcos_r50_fpn_1x_coco.yaml": Size(
        32_244_250, 32_269_600, TV_FCOS, "80 classes instead of 91: -11*2305 = -25,355; +5 learnable per-level scales"),
    "detection/fcos/fcos_r18_fpn_demo_shapes.yaml": Size(
        980_251, 980_251,
        f"{DEMO}: ResNet-18 at 16 base channels 702,096 + FPN P3-P5 at 64 channels (laterals (32+64+128)*64+3*64, "
        "outputs 3*(64*64*9+64)) 125,312 + FCOS head (2-conv GN towers, 3 classes, centerness, 3 scales) 152,843"),
    "detection/fcos/fcos_r50_fpn_torchvision_coco.yaml": Size(
        32_244_245, 32_269_600, TV_FCOS, "80 classes instead of 91: -11*2305 = -25,355"),
    "detection/fcos/fcos_r50_fpn_finetune_demo_shapes.yaml": Size(
        32_066_760, 32_269_600, TV_FCOS,
        "3 classes: cls_logits conv(256, 3, 3)+bias 6,915 instead of 91 outputs 209,755"),
    "detection/fcos/fcos_r50_fpn_finetune_demo_shapes_cpu.yaml": Size(
        32_066_760, 32_269_600, TV_FCOS,  # the same model as fcos_r50_fpn_finetune_demo_shapes
        "3 classes: cls_logits conv(256, 3, 3)+bias 6,915 instead of 91 outputs 209,755"),
    "detection/ssd/ssd300_vgg16_coco.yaml": Size(34_305_206, 35_641_826, TV_SSD, SSD_COCO80),
    "detection/ssd/ssd300_vgg16_torchvision_coco.yaml": Size(34_305_206, 35_641_826, TV_SSD, SSD_COCO80),
    "detection/ssd/ssd300_vgg16_voc.yaml": Size(
        26_285_486, 35_641_826, TV_SSD, "21 class outputs instead of 91: 70 * 133,662 = 9,356,340 fewer"),
    "detection/ssd/ssdlite_mobilenetv3_320_coco.yaml": Size(3_301_460, 3_440_060, TV_SSDLITE, SSDLITE_COCO80),
    "detection/ssd/ssdlite320_mobilenetv3_torchvision_coco.yaml": Size(3_301_460, 3_440_060, TV_SSDLITE,
                                                                        SSDLITE_COCO80),
    # ---- gan
    "gan/attgan/attgan_celeba.yaml": Size(
        88_178_193, 88_178_193,
        "hand count of AttGAN (He et al. 2019; LynnHo/AttGAN-Tensorflow defaults, dims 64, 5 layers, 13 "
        f"attributes, shortcut 1, inject 1): G {ATT_ENC} + dec ConvT 4x4+BN (1024+13)->1024, (1024+512+13)->512, "
        f"512->256, 256->128 32,304,896 + ConvT(128, 3)+bias 6,147 = 43,459,203; {ATT_D} = 44,718,990"),
    "gan/cgan/cgan_demo_digits.yaml": Size(
        564_032, 564_032,
        f"{DEMO}: 32 px RGB, label one-hot concatenated: G ConvT 110->128 (4x4)+BN, 128->64+BN, 64->32+BN, "
        "32->3 391,104; D conv(13, 32, 4), 32->64+BN, 64->128+BN, 128->1 172,928"),
    "gan/cgan/cgan_mnist.yaml": Size(
        971_264, 971_264,
        "hand count of a DCGAN-style conditional GAN at 28 px (Mirza & Osindero 2014 conditioning by one-hot "
        "concatenation): G ConvT(110, 128, 7)+BN 690,176, ConvT(128, 64, 4)+BN 131,200, ConvT(64, 1, 4) 1,024 "
        "= 822,400; D conv(11, 64, 4) 11,264, conv(64, 128, 4)+BN 131,328, conv(128, 1, 7) 6,272 = 148,864"),
    "gan/cyclegan/cyclegan_horse2zebra.yaml": Size(
        28_285_832, 28_285_832,
        f"{CYCLEGAN_REPO} (its print_networks shows 11.378 M and 2.765 M): 2 x resnet_9blocks G 11,378,179 (IN, "
        "biased convs: 7x7 3->64, 64->128, 128->256, 9 blocks of 2 conv(256, 256, 3)+bias, ConvT 256->128, "
        "128->64, 7x7 64->3) + 2 x basic 70x70 D 2,764,737 (3 ch, IN)"),
    "gan/dcgan/dcgan_mnist.yaml": Size(
        6_338_176, 6_342_272,
        "hand count of the PyTorch DCGAN tutorial's 64 px networks (nc 3): G ConvT 100->512->256->128->64->3 "
        "+BN 3,576,704, D conv 3->64->128->256->512->1 +BN 2,765,568",
        "1-channel MNIST: G's last ConvT(64, 1, 4) and D's first conv(1, 64, 4) are 2,048 smaller each"),
    "gan/pix2pix/pix2pix_cityscapes_label2photo.yaml": Size(
        57_182_660, 57_182_660,
        f"{CYCLEGAN_REPO} (its print_networks shows 54.414 M and 2.769 M): unet_256 G (ngf 64, BN) 54,413,955 + basic "
        "70x70 D on 6 channels 2,768,705"),
    "gan/pix2pix/pix2pix_demo_shapes.yaml": Size(
        7_484_132, 7_484_132,
        f"{DEMO}: U-Net G ngf 32, 6 downsamplings 7,314,755 + PatchGAN D ndf 32, 2 layers, 6 channels 169,377"),
    "gan/pix2pix/pix2pix_facades.yaml": Size(
        57_182_660, 57_182_660,
        f"{CYCLEGAN_REPO} (its print_networks shows 54.414 M and 2.769 M): unet_256 G (ngf 64, BN) 54,413,955 + basic "
        "70x70 D on 6 channels 2,768,705"),
    "gan/stargan/stargan_celeba.yaml": Size(
        53_192_576, 53_192_576,
        "hand count of yunjey/stargan (CelebA 128 px, c_dim 5, repeat_num 6): G 7x7 conv(8, 64)+IN, down "
        "64->128->256 +IN, 6 residual blocks of 2 conv(256, 256, 3)+IN, up 256->128->64 +IN, 7x7 conv(64, 3) = "
        "8,430,528; D 6 conv 4x4 +bias 3->64 .. 1024->2048 44,702,656, src conv(2048, 1, 3) 18,432, cls "
        "conv(2048, 5, 2) 40,960 = 44,762,048"),
    "gan/stgan/stgan_celeba.yaml": Size(
        119_717_761, 119_717_761,
        "hand count of STGAN (Liu et al. 2019; csmliu/STGAN defaults, dims 64, 5 layers, 13 attributes, 4 "
        f"STUs, inject 4): G {ATT_ENC} + 4 STUs (ConvT(2c+13, c, 4) + 3 gate conv(2c, c, 3), two normed; c = "
        "512..64) 30,145,280 + dec ConvT 4x4+BN (1024+13)->1024, (1024+512+13)->512, (512+256+13)->256, "
        "(256+128+13)->128 33,695,488 + ConvT(128+64+13, 3)+bias 9,843 = 74,998,771; " + ATT_D + " = 44,718,990"),
    # ---- segmentation
    "segmentation/bisenetv2/bisenetv2_fcn_160k_cityscapes.yaml": Size(
        14_804_255, 14_804_255,
        "hand count of mmseg bisenetv2_fcn (19 classes): backbone detail 519,232 + semantic 1,159,504 + BGA "
        "478,976; FCN decode conv(128, 1024, 3)+BN + fc(1024, 19) 1,201,171; 4 aux FCN heads of 2 convs "
        "16->16, 32->64, 64->256, 128->1024 (+BN, + fc(c, 19)) 4,995 + 56,787 + 743,187 + 10,640,403"),
    "segmentation/deeplabv3/deeplabv3_r101_40k_voc12.yaml": Size(
        60_996_202, 60_996_202, "torchvision deeplabv3_resnet101 weights meta (21 classes, aux head)"),
    "segmentation/deeplabv3/deeplabv3_r101_80k_cityscapes.yaml": Size(
        60_995_174, 60_996_202, "torchvision deeplabv3_resnet101 weights meta (21 classes, aux head)",
        "19 classes: the classifier fc(256, C) and the aux classifier fc(256, C) lose 2*257 each: 1,028 fewer"),
    "segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml": Size(
        42_004_074, 42_004_074, "torchvision deeplabv3_resnet50 weights meta (21 classes, aux head)"),
    "segmentation/deeplabv3/deeplabv3_r50_80k_cityscapes.yaml": Size(
        42_003_046, 42_004_074, "torchvision deeplabv3_resnet50 weights meta (21 classes, aux head)",
        "19 classes: the classifier fc(256, C) and the aux classifier fc(256, C) lose 2*257 each: 1,028 fewer"),
    "segmentation/deeplabv3/deeplabv3_r50_finetune_demo_shapes.yaml": Size(
        41_995_336, 42_004_074, "torchvision deeplabv3_resnet50 weights meta (21 classes, aux head)",
        "4 classes: the classifier fc(256, C) and the aux classifier fc(256, C) lose 17*257 each: 8,738 fewer"),
    "segmentation/ace2p/ace2p_r101_473x473_lip.yaml": Size(66_723_928, 66_723_928, ACE2P_R101),
    "segmentation/ace2p/ace2p_r101_473x473_cihp.yaml": Size(66_723_928, 66_723_928, ACE2P_R101),
    "segmentation/ace2p/ace2p_r101_512x512_atr.yaml": Size(66_722_900, 66_722_900, ACE2P_R101 + " at 18 classes"),
    "segmentation/ace2p/ace2p_r18_demo_figures.yaml": Size(974_990, 974_990, f"{DEMO}: ResNet-18 base 16, deep stem "
                                                           "[16, 16, 32] 710,032 + ACE2P head at 64/32/16/16 channels, "
                                                           "7 classes 264,958"),
    "segmentation/deeplabv3plus/deeplabv3plus_mobilenetv2_40k_voc12.yaml": Size(
        2_946_906, 2_946_906,
        "hand count of the DeepLabV3+ paper's 256-channel head (Chen et al. 2018) on MobileNetV2: torchvision "
        "mobilenet_v2.features less its last 1x1 conv 1,811,712; separable ASPP on 320 ch 750,912; low-level "
        "conv(24, 48, 1)+BN 1,248; two separable 3x3 convs 150,544; fc(256, 21) 5,397; aux FCN conv(96, 256, 3)+BN "
        "+ fc(256, 21) 227,093 (mmseg's DepthwiseSeparableASPPHead is wider: 512 channels, 3x3 bottleneck)"),
    "segmentation/deeplabv3plus/deeplabv3plus_mobilenetv2_80k_cityscapes.yaml": Size(
        2_945_878, 2_946_906, "hand count (see deeplabv3plus_mobilenetv2_40k_voc12)",
        "19 classes: fc(256, C) in the head and the aux head lose 2*257 each: 1,028 fewer"),
    "segmentation/deeplabv3plus/deeplabv3plus_r101_40k_voc12.yaml": Size(
        48_053_466, 48_053_466,
        f"hand count of the DeepLabV3+ paper's 256-channel head on ResNet-101: {R101} + {ASPP_R} + "
        f"{DLV3P_DECODER} 5,397 + {AUX_1024} 2,365,205"),
    "segmentation/deeplabv3plus/deeplabv3plus_r101_80k_cityscapes.yaml": Size(
        48_052_438, 48_053_466, "hand count (see deeplabv3plus_r101_40k_voc12)",
        "19 classes: fc(256, C) in the head and the aux head lose 2*257 each: 1,028 fewer"),
    "segmentation/deeplabv3plus/deeplabv3plus_r50_40k_voc12.yaml": Size(
        29_061_338, 29_061_338,
        f"hand count of the DeepLabV3+ paper's 256-channel head on ResNet-50: {R50} + {ASPP_R} + "
        f"{DLV3P_DECODER} 5,397 + {AUX_1024} 2,365,205"),
    "segmentation/deeplabv3plus/deeplabv3plus_r50_80k_cityscapes.yaml": Size(
        29_060_310, 29_061_338, "hand count (see deeplabv3plus_r50_40k_voc12)",
        "19 classes: fc(256, C) in the head and the aux head lose 2*257 each: 1,028 fewer"),
    "segmentation/fcn/fcn_r50-d8_40k_voc12.yaml": Size(
        35_322_218, 35_322_218, "torchvision fcn_resnet50 weights meta (21 classes, aux head)"),
    "segmentation/fcn/fcn_r50-d8_80k_cityscapes.yaml": Size(
        35_320_678, 35_322_218, "torchvision fcn_resnet50 weights meta (21 classes, aux head)",
        "19 classes: the classifier fc(512, C) loses 2*513 and the aux fc(256, C) 2*257: 1,540 fewer"),
    "segmentation/icnet/icnet_r18-d8_80k_cityscapes.yaml": Size(
        25_174_393, 25_174_393,
        "hand count of mmseg icnet_r18-d8 (19 classes): ResNetV1c-18 trunk 11,195,744 (torchvision resnet18 "
        "less fc, + deep stem 19,232), light branch 28,768, conv_sub2 conv(128, 256, 1)+BN 33,280, PPM 4 x "
        "(conv(512, 512, 1)+BN) 1,052,672, bottleneck conv(2560, 512, 3)+BN 11,797,504, conv_sub4 131,584; "
        "ICNeck 484,352; FCN decode 150,163 + 2 aux FCN heads 150,163 each"),
    "segmentation/icnet/icnet_r50-d8_80k_cityscapes.yaml": Size(
        47_827_833, 47_827_833,
        "hand count of mmseg icnet_r50-d8 (19 classes): ResNetV1c-50 trunk 23,527,264 (" + R50 + " + deep stem "
        "19,232), light branch 3->32->32->64 28,768, conv_sub2 conv(512, 256, 1)+BN 131,584, PPM 4 x "
        "(conv(2048, 512, 1)+BN) 4,198,400, bottleneck conv(4096, 512, 3)+BN 18,875,392, conv_sub4 131,584; "
        "ICNeck (CFF 256+256->128 328,192, 128+64->128 156,160); FCN "
        "decode conv(128, 128, 3)+BN + fc(128, 19) 150,163 + 2 aux FCN heads 150,163 each"),
    "segmentation/pspnet/pspnet_r50-d8_40k_voc12.yaml": Size(
        48_957_802, 48_957_802,
        f"hand count of mmseg pspnet_r50-d8's head on a torchvision-stem ResNet-50 (21 classes): {R50} + "
        f"{PSP_HEAD} 23,084,565 + {AUX_1024} 2,365,205 (mmseg's ResNetV1c deep stem would add 19,232)"),
    "segmentation/pspnet/pspnet_r50-d8_80k_cityscapes.yaml": Size(
        48_956_262, 48_957_802, "hand count (see pspnet_r50-d8_40k_voc12)",
        "19 classes: fc(512, C) loses 2*513 and the aux fc(256, C) 2*257: 1,540 fewer"),
    "segmentation/unet/unet_demo_shapes.yaml": Size(
        485_124, 485_124,
        f"{DEMO}: U-Net at base_channels 16, 4 stages 482,720 + FCN conv(16, 16, 3)+BN + fc(16, 4) 2,404"),
    "segmentation/unet/unet_s5-d16_40k_voc12.yaml": Size(
        31_151_146, 31_151_146,
        "hand count of U-Net (Ronneberger et al. 2015) with BN and deconv upsampling (21 classes): encoder 5 x "
        "2 conv 3x3+BN, 64..1024 ch, 18,847,168; decoder 4 x (ConvT(c, c/2, 2)+bias + conv(c, c/2, 3)+BN + "
        "conv(c/2, c/2, 3)+BN), c = 1024..128, 12,190,400; FCN conv(64, 64, 3)+BN + fc(64, 21) 38,357; aux FCN "
        "conv(128, 64, 3)+BN + fc(64, 21) 75,221"),
    "segmentation/unet/unet_s5-d16_80k_cityscapes.yaml": Size(
        31_150_886, 31_151_146, "hand count (see unet_s5-d16_40k_voc12)",
        "19 classes: fc(64, C) in the head and the aux head lose 2*65 each: 260 fewer"),
    # ---- video
    "video/attention_cluster/attention_cluster_demo_features.yaml": Size(
        2_436_664, 2_436_664,
        f"{DEMO}: 8 shifting-attention units per modality (fc(1024, 8) + 16, fc(128, 8) + 16) 9,264, "
        "fc(8*1152, 256) 2,359,552, fc(256, 256) 65,792, fc(256, 8) 2,056"),
    "video/attention_cluster/attention_cluster_youtube8m.yaml": Size(
        57_807_830, 57_807_830,
        "hand count of PaddleVideo's AttentionCluster (32 units per modality, fc 1024 -> 4096): units "
        f"fc(1024, 32) + 64, fc(128, 32) + 64 37,056; fc(32*1152, 1024) 37,749,760; fc(1024, 4096) 4,198,400; "
        f"{YT8M_LOGITS}"),
    "video/attention_lstm/attention_lstm_youtube8m.yaml": Size(
        108_737_304, 108_737_304,
        "hand count of PaddleVideo's AttentionLSTM: per modality fc(1024 or 128, 512), 2 LSTM(512, 1024) of "
        "4*1024*(512+1024) + 2*4096 = 6,299,648 (PyTorch's two bias vectors), attention fc(2048, 1); "
        f"25,793,538 in all; fc(4096, 8192) 33,562,624; fc(8192, 4096) 33,558,528; {YT8M_LOGITS}"),
    "video/bmn/bmn_400x100_9e_activitynet_feature.yaml": Size(
        4_978_564, 4_978_564,
        "hand count of MMAction2's BMN layout (bmn_2xb8-400x100-9e_activitynet-feature, feat_dim 400, T = D = 100, "
        "hidden 256/128/512; its model zoo gives no count): base 2 grouped conv1d(400->256, 256->256, k3, groups 4)"
        "+bias 126,464; start and end conv1d(256, 256, k3, groups 4)+bias + fc(256, 1) 49,665 each; PEM conv1d(256, "
        "256, k3)+bias 196,864, conv3d(256, 512, 32x1x1)+bias 4,194,816, fc(512, 128) 65,664, 2 conv(128, 128, 3)"
        "+bias 295,168, fc(128, 2) 258. MMAction2 holds the 100 x 320,000 sampling matrix as a frozen "
        "nn.Parameter, so its parameters() sum reads 32,000,000 more (36,978,564); ours is a non-persistent buffer"),
    "video/bmn/bmn_demo_long_videos.yaml": Size(
        241_540, 241_540,
        f"{DEMO}: BMN with feat_dim 128, hidden 64/64/128, 16 samples: base grouped conv1d(128->64, 64->64, k3, "
        "groups 4)+bias 9,344; start and end conv1d(64, 64, k3, groups 4)+bias + fc(64, 1) 3,201 each; PEM "
        "conv1d(64, 64, k3)+bias 12,352, conv3d(64, 128, 16x1x1)+bias 131,200, fc(128, 64) 8,256, 2 conv(64, 64, 3)"
        "+bias 73,856, fc(64, 2) 130"),
    "video/ctcn/ctcn_activitynet_feature.yaml": Size(
        318_021_421, 318_021_421,
        "hand count of PaddleVideo's C-TCN layout (PaddleCV/PaddleVideo/models/ctcn/fpn_ctcn.py with configs/"
        "ctcn.yaml: 402 concepts, 7 anchors, 201 classes incl. background; its model zoo gives no count): stem "
        "conv(1, 32, 7x1)+BN and conv(32, 64, 7x1)+BN 14,752; ResNet-50 bottleneck stages with (3, 1) kernels "
        "15,953,664 (res2-res5 23,498,496 less 6 of the 9 taps of every 3x3 conv, 7,544,832); FPN laterals "
        "fc(256|512|1024|2048, 512) 1,968,128, 3 smoothing conv(512, 512, 3x1)+bias 2,360,832, extra levels "
        "conv(2048, 512, 3x1)+bias and 3 conv(512, 512, 3x1)+bias 5,507,072; loc head (shared by the 8 levels) "
        "conv(512, 256, 3x1)+bias + conv(256, 14, 1x402)+bias 1,834,254; cls head conv(512, 512, 3x1)+bias + "
        "conv(512, 1407, 1x402)+bias 290,382,719 (91% of the model: the (1, 402) kernel over the concepts)"),
    "video/nextvlad/nextvlad_youtube8m.yaml": Size(
        88_889_378, 88_889_378,
        "hand count of NeXtVLAD (Lin et al. 2018; PaddleVideo's nextvlad, clusters 128/64, groups 8/4, "
        "expansion 2): rgb layer fc(1024, 2048) + fc(2048, 8) + bias-free 2048*1024 + BN + centres 256*128 + "
        "VLAD BN 2*32,768 = 4,313,096; audio layer 112,388; bias-free hidden 36,864*2048 75,497,472 + BN 4,096; "
        "context gating 2048->256->2048 1,049,088; fc(2048, 3862) 7,913,238"),
    "video/nonlocal/nonlocal_r50_kinetics400.yaml": Size(
        31_686_096, 31_686_096,
        f"hand count of C2D ResNet-50 + 5 embedded-Gaussian non-local blocks (Wang et al. 2018): {R50} + 2 "
        "blocks at 512 ch (theta/phi/g fc(512, 256), out fc(256, 512)+BN) 526,592 each + 3 at 1024 ch "
        "2,101,760 each + fc(2048, 400) 819,600"),
    "video/r2plus1d/r2plus1d_r18_kinetics400.yaml": Size(
        31_505_325, 31_505_325, "torchvision r2plus1d_18 weights meta (400 classes)"),
    "video/r2plus1d/r2plus1d_r18_finetune_demo_videos.yaml": Size(
        31_304_229, 31_505_325, "torchvision r2plus1d_18 weights meta (400 classes)",
        "8 classes: fc(512, 8) 4,104 instead of fc(512, 400) 205,200"),
    "video/r2plus1d/r2plus1d_r18_finetune_demo_videos_cpu.yaml": Size(
        31_304_229, 31_505_325, "torchvision r2plus1d_18 weights meta (400 classes)",  # the recipe model
        "8 classes: fc(512, 8) 4,104 instead of fc(512, 400) 205,200"),
    "video/stnet/stnet_r50_kinetics400.yaml": Size(
        33_158_864, 33_158_864,
        "hand count of PaddleVideo's StNet (He et al. 2019) on ResNet-50: 15-channel 7x7 stem conv 47,040 + BN "
        "+ res2-res5 23,498,496, temporal blocks conv3d(512, 512, 3x1x1)+bias+BN 787,968 and (1024) 3,148,800; "
        "temporal Xception head 5,266,432 (BN, depthwise + pointwise 2048->1024 and 1024->1024, shortcut "
        "2048->1024, BNs) + fc(1024, 400) 410,000"),
    "video/tsm/tsm_r18_demo_videos.yaml": Size(
        703_128, 703_128, f"{DEMO}: ResNet-18 at base_channels 16 702,096 (shift adds nothing) + fc(128, 8) 1,032"),
    "video/tsm/tsm_r50_1x1x8_kinetics400.yaml": Size(
        24_327_632, 24_327_632, TSM_R50),
    "video/tsm/tsm_r50_1x1x8_ucf101.yaml": Size(
        23_714_981, 24_327_632, TSM_R50,
        "101 classes: fc(2048, 101) is 2049*299 = 612,651 smaller than fc(2048, 400)"),
    "video/tsn/tsn_r50_1x1x8_kinetics400.yaml": Size(24_327_632, 24_327_632, TSN_R50),
}


def count_params(model: torch.nn.Module) -> int:
    """Every parameter, trainable or frozen: freezing is a training choice, not a change of architecture."""
    return sum(p.numel() for p in model.parameters())


def check_size(relpath: str, model: torch.nn.Module) -> None:
    """Fail unless ``model`` (the full-size build of configs/``relpath``) counts exactly its entry in SIZES."""
    count = count_params(model)
    entry = SIZES.get(relpath)
    if entry is None:
        raise AssertionError(
            f"configs/{relpath}: no expected parameter count: add an entry to tests/model_sizes.py (this build "
            f"has {count:,} parameters; give the published number it corresponds to and its source)")
    if count != entry.params:
        source = f"{entry.cite}: {entry.published:,}" + (f"; ours differs: {entry.differs}" if entry.differs else "")
        raise AssertionError(f"configs/{relpath}: {count:,} parameters, expected {entry.params:,} ({source}): "
                             "the architecture drifted from its source")
