"""The data sample that carries one image's segmentation annotations and predictions."""

from __future__ import annotations

from mmengine.structures import BaseDataElement, PixelData


class SegDataSample(BaseDataElement):
    """Fields: ``gt_sem_seg`` (PixelData, ``data`` [1, H, W] integer class ids, uint8 from the pipeline
    to keep worker shared memory small; consumers widen with ``.long()``), ``pred_sem_seg``
    ([1, H, W], long) and ``seg_logits`` (PixelData, ``data`` of shape [C, H, W], float).

    Metainfo keys used across the task: ``img_path``, ``seg_map_path``, ``ori_shape`` (H, W),
    ``img_shape`` (H, W after the pipeline), ``pad_shape``, ``batch_input_shape``,
    ``flip``, ``reduce_zero_label``.
    """

    @property
    def gt_sem_seg(self) -> PixelData:
        return self._gt_sem_seg

    @gt_sem_seg.setter
    def gt_sem_seg(self, value: PixelData) -> None:
        self.set_field(value, "_gt_sem_seg", dtype=PixelData)

    @gt_sem_seg.deleter
    def gt_sem_seg(self) -> None:
        del self._gt_sem_seg

    @property
    def pred_sem_seg(self) -> PixelData:
        return self._pred_sem_seg

    @pred_sem_seg.setter
    def pred_sem_seg(self, value: PixelData) -> None:
        self.set_field(value, "_pred_sem_seg", dtype=PixelData)

    @pred_sem_seg.deleter
    def pred_sem_seg(self) -> None:
        del self._pred_sem_seg

    @property
    def seg_logits(self) -> PixelData:
        return self._seg_logits

    @seg_logits.setter
    def seg_logits(self, value: PixelData) -> None:
        self.set_field(value, "_seg_logits", dtype=PixelData)

    @seg_logits.deleter
    def seg_logits(self) -> None:
        del self._seg_logits
