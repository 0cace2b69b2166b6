"""Attribute-editing accuracy: how often a given attribute classifier sees the requested attributes on the
generated faces (StarGAN / AttGAN / STGAN's "attribute generation accuracy").

The classifier is a TorchScript file (``torch.jit.save``): it carries its architecture, so any network trained
for the dataset's attributes works. Input float [B, 3, S, S] RGB 0..255 (the images are resized to
``input_size`` when given); output logits [B, K] in the order of ``attr_names``. Without a file the metric logs
why it is skipped and returns nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from gan.evaluation.fields import image_field, sample_name
from gan.evaluation.inception import pick_device
from gan.registry import METRICS
from oars.errors import DataError, DataFileNotFoundError


@METRICS.register_module()
class AttributeAccuracy(BaseMetric):
    """Fraction of (image, attribute) pairs where the classifier's prediction (logit > ``threshold``) equals the
    sample's target attribute; keys ``attr_acc`` and ``attr_acc/<name>`` per attribute.

    Each data sample needs ``fake_img`` (float [3, H, W] 0..255) and ``target_attrs`` (float [K] 0/1, set by
    the model at predict time). ``attr_names`` defaults to the samples' metainfo ``attr_names`` (the dataset's
    ``selected_attrs``).
    """

    default_prefix: str | None = 'gan'

    def __init__(self, classifier: str | None = None, attr_names: Sequence[str] | None = None,
                 input_size: int | None = None, threshold: float = 0.0, fake_key: str = 'fake_img',
                 target_key: str = 'target_attrs', device: str | None = None, collect_device: str = 'cpu',
                 prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if classifier is not None and not os.path.isfile(str(classifier)):
            raise DataFileNotFoundError(f'AttributeAccuracy: classifier file not found: {classifier}')
        self.classifier_path = classifier
        self.attr_names = None if attr_names is None else tuple(str(a) for a in attr_names)
        self.input_size = input_size
        self.threshold = float(threshold)
        self.fake_key, self.target_key = fake_key, target_key
        self.device = pick_device(device)
        self._net: torch.jit.ScriptModule | None = None

    @property
    def skip_reason(self) -> str | None:
        if self.classifier_path is None:
            return 'AttributeAccuracy skipped: no classifier file given (a TorchScript attribute classifier)'
        return None

    def _classifier(self) -> torch.jit.ScriptModule:
        if self._net is None:
            try:
                self._net = torch.jit.load(self.classifier_path, map_location=self.device).eval()
            except (RuntimeError, ValueError) as err:
                raise DataError(f'AttributeAccuracy: {self.classifier_path} is not a TorchScript file '
                                f'(torch.jit.save): {err}') from None
        return self._net

    def process(self, data_batch, data_samples: Sequence) -> None:
        """Classify the batch's fake images; keep (correct bool [K]) per sample."""
        if self.skip_reason:
            return
        fakes, targets = [], []
        for s in data_samples:
            fake = image_field('AttributeAccuracy', s, (self.fake_key,))
            if self.input_size is not None:
                fake = F.interpolate(fake[None], size=(self.input_size,) * 2, mode='bilinear',
                                     align_corners=False)[0]
            fakes.append(fake)
            target = s.get(self.target_key)
            if target is None:
                raise DataError(f'AttributeAccuracy: data sample of {sample_name(s)} has no {self.target_key!r} '
                                f'(the model sets the requested attributes at predict time)')
            targets.append(torch.as_tensor(target).float().cpu().reshape(-1))
            if self.attr_names is None and s.get('attr_names') is not None:
                self.attr_names = tuple(s.get('attr_names'))
        with torch.no_grad():
            logits = self._classifier()(torch.stack(fakes).to(self.device)).float().cpu()
        target = torch.stack(targets)
        if logits.shape != target.shape:
            raise DataError(f'AttributeAccuracy: the classifier gives logits {tuple(logits.shape)} for target '
                            f'attributes {tuple(target.shape)} ({self.classifier_path})')
        self.results.extend((logits > self.threshold) == (target > 0.5))

    def evaluate(self, size: int) -> dict:
        """The accuracies, or ``{}`` with the skip reason in the log (no classifier)."""
        if self.skip_reason:
            self.results.clear()
            print_log(self.skip_reason, logger='current')
            return {}
        return super().evaluate(size)

    def compute_metrics(self, results: list) -> dict[str, float]:
        correct = torch.stack(results).double()  # [N, K]
        names = self.attr_names or tuple(str(i) for i in range(correct.shape[1]))
        if len(names) != correct.shape[1]:
            raise DataError(f'AttributeAccuracy: {len(names)} attr_names {list(names)} for {correct.shape[1]} '
                            f'classifier outputs')
        out = {'attr_acc': float(correct.mean())}
        out.update({f'attr_acc/{n}': float(v) for n, v in zip(names, correct.mean(0), strict=True)})
        return out
