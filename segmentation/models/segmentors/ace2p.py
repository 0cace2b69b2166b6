"""ACE2P segmentor: an :class:`EncoderDecoder` whose decode head (:class:`ACE2PHead`) also learns edges."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from segmentation.flip_pairs import check_flip_pairs
from segmentation.registry import MODELS
from segmentation.structures import SegDataSample
from segmentation.transforms_parsing import label_edges

from .encoder_decoder import EncoderDecoder


@MODELS.register_module()
class ACE2PSegmentor(EncoderDecoder):
    """Backbone (ResNet-101, deep stem, output stride 16) -> :class:`ACE2PHead` (parsing, fusion and edge logits).

    Everything but training is :class:`EncoderDecoder`'s: ``predict`` and ``tensor`` mode (and so the export) give
    the head's *fusion* logits upsampled to the input, and ``test_cfg.aug`` runs multi-scale / flip TTA, here with
    ``test_cfg.aug.flip_label_pairs`` applied (the left/right class channels of mirrored views swapped back).

    ``loss`` passes the head the label maps and the edge targets: each sample's ``gt_edge_map`` (``GenerateEdge``
    in the pipeline, run in the data workers), padded to the batch with the ignore index; a sample without one gets
    its edges from its (padded) label map by the same function (:func:`label_edges`, edge width 3) on the CPU.
    ``auxiliary_head`` is not used by ACE2P (its edge and fusion branches are the deep supervision).
    """

    def __init__(self, *args: Any, edge_width: int = 3, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        label_edges(np.zeros((1, 1), np.uint8), edge_width)  # checks it at build time
        self.edge_width = edge_width
        aug = self.test_cfg.get("aug")
        if aug is not None:
            check_flip_pairs(aug.get("flip_label_pairs"), "ACE2PSegmentor: test_cfg.aug.flip_label_pairs",
                             self.num_classes)

    def _stack_edges(self, gt: torch.Tensor, data_samples: list[SegDataSample]) -> torch.Tensor:
        """Edge targets [B, H, W] int64 at the padded batch size (``gt``'s): each sample's ``gt_edge_map`` padded
        with the ignore index, or :func:`label_edges` of its label map."""
        ignore = int(getattr(self.decode_head, "ignore_index", 255))
        edges = []
        for i, sample in enumerate(data_samples):
            if "gt_edge_map" not in sample:
                edges.append(torch.from_numpy(label_edges(gt[i].cpu().numpy(), self.edge_width, ignore)))
                continue
            edge = sample.gt_edge_map.data.reshape(sample.gt_edge_map.data.shape[-2:]).long()
            h, w = edge.shape
            if h > gt.shape[-2] or w > gt.shape[-1]:
                where = sample.metainfo.get("seg_map_path", f"sample {i}")
                raise ValueError(f"ACE2PSegmentor: edge map of {where} is {tuple(edge.shape)}, larger than the "
                                 f"batch's label maps {tuple(gt.shape[-2:])}; GenerateEdge must run after every "
                                 "geometric transform")
            padded = edge.new_full(gt.shape[-2:], ignore)
            padded[:h, :w] = edge
            edges.append(padded)
        return torch.stack(edges).to(gt.device).long()

    def loss(self, inputs: torch.Tensor, data_samples: list[SegDataSample]) -> dict[str, torch.Tensor]:
        """``decode.parsing.*``, ``decode.fusion.*`` (CE and Lovász), ``decode.edge.loss_edge`` and
        ``decode.acc_seg`` (of the fusion logits)."""
        gt = self._stack_gt(inputs, data_samples)
        outputs = self.decode_head(self.extract_feat(inputs))
        losses = self.decode_head.loss(outputs, gt, self._stack_edges(gt, data_samples))
        return {f"decode.{k}": v for k, v in losses.items()}
