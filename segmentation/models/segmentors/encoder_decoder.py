"""Encoder-decoder segmentor: backbone (+ neck) -> decode head (+ auxiliary heads during training)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import PixelData
from torch import nn

from oars.models import building
from oars.models.building import ModuleCfg
from oars.models.task_model import TaskModel
from segmentation.registry import MODELS
from segmentation.structures import SegDataSample

from ..data_preprocessor import SegDataPreprocessor
from ..utils import resize
from .slide_inference import slide_inference
from .tta import check_aug_cfg, tta_inference


def _build(cfg: ModuleCfg, what: str, default_args: dict[str, Any] | None = None) -> nn.Module:
    """:func:`oars.models.building.build_part` in the segmentation registry."""
    return building.build_part(MODELS, "EncoderDecoder", cfg, what, default_args)


@MODELS.register_module()
class EncoderDecoder(TaskModel):
    """Backbone -> optional neck -> ``decode_head``; ``auxiliary_head`` (one config or a list) adds deep
    supervision losses during training only.

    Heads are built with ``in_channels`` = the backbone's (or neck's) ``out_channels`` list and the
    segmentor's ``num_classes`` (written once, here); each head picks its inputs with ``in_index``.
    ``test_cfg``: ``{mode: whole}`` or ``{mode: slide, crop_size: [h, w], stride: [h, w], batch_size: n}``
    (``batch_size``: windows per forward in slide mode, default 1, to bound memory). Test-time augmentation:
    ``test_cfg.aug: {scales: [0.75, 1.0, 1.25], flip: true, flip_direction: [horizontal]}`` runs that inference on
    each scaled (and flipped) view and averages the views' softmax probabilities (``tta.tta_inference``); with it,
    ``predict``'s ``seg_logits`` hold those averaged probabilities, not logits. ``tensor`` mode (export) ignores it.

    Modes: ``loss`` -> ``{'decode.loss_ce': ..., 'aux.loss_ce': ...}`` (``aux0.``, ``aux1.`` for a list);
    ``predict`` -> data samples with ``seg_logits`` / ``pred_sem_seg`` at each ``ori_shape``; ``tensor`` ->
    logits [B, num_classes, H, W] at the input size.
    """

    TEST_MODES = ("whole", "slide")

    def __init__(
        self,
        backbone: ModuleCfg,
        decode_head: ModuleCfg,
        num_classes: int,
        neck: ModuleCfg | None = None,
        auxiliary_head: ModuleCfg | Sequence[ModuleCfg] | None = None,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
        data_preprocessor: dict[str, Any] | nn.Module | None = None,
        align_corners: bool = False,
        init_cfg: dict[str, Any] | None = None,
    ) -> None:
        if data_preprocessor is None:
            data_preprocessor = SegDataPreprocessor()
        elif isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.num_classes = building.check_num_classes("EncoderDecoder", num_classes, minimum=2,
                                                      note="use 2 for foreground/background")
        self.align_corners = align_corners
        self.train_cfg = dict(train_cfg or {})
        self.test_cfg = self._check_test_cfg(dict(test_cfg or {}))

        self.backbone = _build(backbone, "backbone")
        channels = self._out_channels(self.backbone, "backbone")
        self.neck = None
        if neck is not None:
            self.neck = _build(neck, "neck", dict(in_channels=channels))
            channels = self._out_channels(self.neck, "neck")
        self.feat_channels = channels
        head_args = dict(in_channels=channels, num_classes=num_classes, align_corners=align_corners)
        self.decode_head = self._build_head(decode_head, "decode_head", head_args)
        self.auxiliary_head: nn.Module | None = None
        if auxiliary_head is not None:
            if isinstance(auxiliary_head, (dict, nn.Module)):
                self.auxiliary_head = self._build_head(auxiliary_head, "auxiliary_head", head_args)
            else:
                self.auxiliary_head = nn.ModuleList(
                    self._build_head(cfg, f"auxiliary_head[{i}]", head_args) for i, cfg in enumerate(auxiliary_head)
                )

    # ----------------------------------------------------------------- construction helpers
    @staticmethod
    def _out_channels(module: nn.Module, what: str) -> list[int]:
        return building.out_shape("EncoderDecoder", module, what)[0]

    def _build_head(self, cfg: ModuleCfg, what: str, head_args: dict[str, Any]) -> nn.Module:
        building.check_part_num_classes("EncoderDecoder", cfg, self.num_classes, what)
        head = _build(cfg, what, head_args)
        if getattr(head, "num_classes", self.num_classes) != self.num_classes:
            raise ValueError(
                f"EncoderDecoder: {what} predicts {head.num_classes} classes, model has {self.num_classes}"
            )
        return head

    def _check_test_cfg(self, cfg: dict[str, Any]) -> dict[str, Any]:
        cfg.setdefault("mode", "whole")
        if cfg["mode"] not in self.TEST_MODES:
            raise ValueError(f"EncoderDecoder: test_cfg.mode must be one of {self.TEST_MODES}, got {cfg['mode']!r}")
        if cfg["mode"] == "slide":
            for key in ("crop_size", "stride"):
                value = cfg.get(key)
                if value is None or len(value) != 2 or min(value) < 1:
                    raise ValueError(
                        f"EncoderDecoder: test_cfg.mode=slide needs test_cfg.{key} as [h, w] positive ints, "
                        f"got {value!r}"
                    )
            bs = cfg.get("batch_size")
            if bs is not None and (isinstance(bs, bool) or not isinstance(bs, int) or bs < 1):
                raise ValueError(
                    f"EncoderDecoder: test_cfg.batch_size (windows per forward in slide mode) must be an int "
                    f">= 1 or null (1), got {bs!r}"
                )
        if cfg.get("aug") is not None:
            cfg["aug"] = check_aug_cfg(cfg["aug"])
        return cfg

    @property
    def with_neck(self) -> bool:
        return self.neck is not None

    @property
    def with_auxiliary_head(self) -> bool:
        return self.auxiliary_head is not None

    # ----------------------------------------------------------------- forward paths
    def extract_feat(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        feats = self.backbone(inputs)
        if self.neck is not None:
            feats = self.neck(feats)
        return [feats] if isinstance(feats, torch.Tensor) else list(feats)

    def encode_decode(self, inputs: torch.Tensor) -> torch.Tensor:
        """Images [B, 3, H, W] -> decode-head logits resized to (H, W)."""
        return self.decode_head.predict(self.extract_feat(inputs), inputs.shape[-2:])

    def inference(self, inputs: torch.Tensor) -> torch.Tensor:
        """Logits at the (padded) input size, by whole-image or sliding-window inference (``test_cfg``)."""
        if self.test_cfg["mode"] == "slide":
            return slide_inference(
                inputs,
                self.test_cfg["crop_size"],
                self.test_cfg["stride"],
                self.encode_decode,
                self.test_cfg.get("batch_size"),
            )
        return self.encode_decode(inputs)

    def aug_inference(self, inputs: torch.Tensor) -> torch.Tensor:
        """Softmax probabilities [B, K, H, W] averaged over the ``test_cfg.aug`` views of the padded batch
        [B, 3, H, W]; each view runs :meth:`inference` (whole or slide). Scaled views are padded to the data
        preprocessor's ``size_divisor`` (or ``aug.size_divisor``) with its ``pad_val``."""
        aug = self.test_cfg.get("aug")
        if aug is None:
            raise ValueError("EncoderDecoder.aug_inference needs test_cfg.aug, e.g. {scales: [0.75, 1.0, 1.25], "
                             "flip: true}")
        divisor = aug["size_divisor"] or getattr(self.data_preprocessor, "size_divisor", None) or 1
        return tta_inference(
            inputs,
            self.inference,
            aug["scales"],
            aug["flip_direction"] if aug["flip"] else (),
            size_divisor=int(divisor),
            pad_val=float(getattr(self.data_preprocessor, "pad_val", 0.0)),
            align_corners=self.align_corners,
            flip_label_pairs=aug.get("flip_label_pairs", ()),
        )

    def _forward(self, inputs: torch.Tensor) -> Any:
        return self.encode_decode(inputs)

    def _stack_gt(self, inputs: torch.Tensor, data_samples: list[SegDataSample] | None) -> torch.Tensor:
        if not data_samples:
            raise ValueError("EncoderDecoder: mode='loss' needs data_samples carrying gt_sem_seg")
        gts = []
        for i, sample in enumerate(data_samples):
            where = sample.metainfo.get("seg_map_path", f"sample {i}")
            if "gt_sem_seg" not in sample:
                raise ValueError(f"EncoderDecoder: {where} has no gt_sem_seg, needed for mode='loss'")
            gt = sample.gt_sem_seg.data
            if tuple(gt.shape[-2:]) != tuple(inputs.shape[-2:]):
                raise ValueError(
                    f"EncoderDecoder: label map of {where} has shape {tuple(gt.shape)} but the batch is "
                    f"{tuple(inputs.shape)}; pad labels with SegDataPreprocessor"
                )
            gts.append(gt.reshape(gt.shape[-2:]))
        return torch.stack(gts).long()

    def loss(self, inputs: torch.Tensor, data_samples: list[SegDataSample]) -> dict[str, torch.Tensor]:
        gt = self._stack_gt(inputs, data_samples)
        feats = self.extract_feat(inputs)
        losses = {f"decode.{k}": v for k, v in self.decode_head.loss(self.decode_head(feats), gt).items()}
        if isinstance(self.auxiliary_head, nn.ModuleList):
            for i, head in enumerate(self.auxiliary_head):
                losses.update({f"aux{i}.{k}": v for k, v in head.loss(head(feats), gt).items()})
        elif self.auxiliary_head is not None:
            head = self.auxiliary_head
            losses.update({f"aux.{k}": v for k, v in head.loss(head(feats), gt).items()})
        return losses

    def predict(self, inputs: torch.Tensor, data_samples: list[SegDataSample] | None = None) -> list[SegDataSample]:
        if data_samples is None:
            shape = tuple(inputs.shape[-2:])
            data_samples = [
                SegDataSample(metainfo=dict(ori_shape=shape, img_shape=shape, batch_input_shape=shape))
                for _ in range(inputs.shape[0])
            ]
        with_aug = self.test_cfg.get("aug") is not None
        return self.postprocess_result(self.aug_inference(inputs) if with_aug else self.inference(inputs), data_samples)

    def postprocess_result(self, logits: torch.Tensor, data_samples: list[SegDataSample]) -> list[SegDataSample]:
        """Per sample: drop the padding (crop to ``img_shape``), undo a test-time flip, resize bilinearly to
        ``ori_shape``, then argmax into ``pred_sem_seg``."""
        if len(data_samples) != logits.shape[0]:
            raise ValueError(f"EncoderDecoder: {logits.shape[0]} images but {len(data_samples)} data samples")
        for i, sample in enumerate(data_samples):
            meta = sample.metainfo
            h, w = meta.get("img_shape", logits.shape[-2:])[:2]
            out = logits[i : i + 1, :, :h, :w]
            if meta.get("flip", False):
                direction = meta.get("flip_direction", "horizontal")
                dims = {"horizontal": [3], "vertical": [2], "diagonal": [2, 3]}.get(direction)
                if dims is None:
                    raise ValueError(f"EncoderDecoder: unknown flip_direction {direction!r} in {meta.get('img_path')}")
                out = out.flip(dims)
            out = resize(out, meta.get("ori_shape", (h, w))[:2], self.align_corners)[0]
            sample.seg_logits = PixelData(data=out)
            sample.pred_sem_seg = PixelData(data=out.argmax(dim=0, keepdim=True))
        return data_samples
