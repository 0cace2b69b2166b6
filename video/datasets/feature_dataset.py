"""Lists of frame-level feature files (YouTube-8M style ``rgb`` / ``audio`` features per frame)."""

from __future__ import annotations

from oars.data import storage
from video.datasets.base import VideoBaseDataset
from video.registry import DATASETS


@DATASETS.register_module()
class FeatureDataset(VideoBaseDataset):
    """Feature files listed as ``relative/path.npz label`` lines (``path l1 l2 ...`` with ``multi_label``, as
    YouTube-8M's several labels per video).

    Each file holds one array per modality, [T, D] (``.npz``, or a ``.pkl`` dict), uint8-quantised or float;
    ``LoadFeatures`` reads and dequantises it in the pipeline. Paths are relative to ``data_root`` joined with
    ``data_prefix['feature']``. Each sample: ``filename`` (absolute), ``label``, ``multi_label``, ``num_classes``.
    """

    line_format = 'relative/path.npz label (or several labels with multi_label: true)'

    def default_prefix(self) -> dict:
        return {'feature': ''}

    def load_data_list(self) -> list[dict]:
        prefix = self.data_prefix['feature']
        return [dict(filename=storage.absolute(storage.join(prefix, fields[0])), label=label,
                     multi_label=self.multi_label, num_classes=self.num_classes)
                for _, fields, label in self._lines(1)]
