"""The data sample that carries one image's boxes: ground truth, ignored boxes and predictions."""

from __future__ import annotations

from mmengine.structures import BaseDataElement, InstanceData


class DetDataSample(BaseDataElement):
    """Fields (each an ``InstanceData``):

    - ``gt_instances``: ``bboxes`` float32 [N, 4] (x1, y1, x2, y2, pixels of the *pipeline's* image,
      i.e. after resize/flip/crop), ``labels`` int64 [N] (0-based class index).
    - ``ignored_instances``: same fields; COCO crowd boxes and VOC ``difficult`` boxes. Neither
      positives nor negatives in training; excluded from matching in evaluation.
    - ``pred_instances``: ``bboxes`` float32 [K, 4] in *original image* pixels (the detector undoes
      ``scale_factor``), ``scores`` float32 [K], ``labels`` int64 [K].

    Metainfo keys used across the task: ``img_id``, ``img_path``, ``ori_shape`` (H, W),
    ``img_shape`` (H, W after the pipeline), ``scale_factor`` (w_scale, h_scale: pipeline / original),
    ``flip``, ``flip_direction``, ``pad_shape``, ``batch_input_shape``.
    """

    @property
    def gt_instances(self) -> InstanceData:
        return self._gt_instances

    @gt_instances.setter
    def gt_instances(self, value: InstanceData) -> None:
        self.set_field(value, "_gt_instances", dtype=InstanceData)

    @gt_instances.deleter
    def gt_instances(self) -> None:
        del self._gt_instances

    @property
    def ignored_instances(self) -> InstanceData:
        return self._ignored_instances

    @ignored_instances.setter
    def ignored_instances(self, value: InstanceData) -> None:
        self.set_field(value, "_ignored_instances", dtype=InstanceData)

    @ignored_instances.deleter
    def ignored_instances(self) -> None:
        del self._ignored_instances

    @property
    def pred_instances(self) -> InstanceData:
        return self._pred_instances

    @pred_instances.setter
    def pred_instances(self, value: InstanceData) -> None:
        self.set_field(value, "_pred_instances", dtype=InstanceData)

    @pred_instances.deleter
    def pred_instances(self) -> None:
        del self._pred_instances
