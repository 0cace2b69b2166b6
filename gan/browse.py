"""``tools/browse_dataset.py`` pictures of GAN samples: the generator's input and its target (``img_A`` |
``img_B``, or the real image and its class) as the pipeline packs them (RGB: ``gan.transforms``)."""

from __future__ import annotations

import numpy as np
import torch

from oars.visualization.browse import enlarge, packed_image, upscale_factor
from oars_deploy.draw import side_by_side


def _label_text(value: torch.Tensor, classes: list[str]) -> str:
    """A class id (or a multi-hot attribute vector) as names."""
    t = torch.as_tensor(value).detach().cpu().reshape(-1)
    if t.numel() == 1 and not t.is_floating_point():
        i = int(t.item())
        return classes[i] if 0 <= i < len(classes) else str(i)
    on = torch.nonzero(t > 0.5).reshape(-1).tolist()
    return ", ".join(classes[i] if i < len(classes) else str(i) for i in on) or "(none)"


def draw_pipeline_sample(sample: dict, dataset_meta: dict) -> np.ndarray:
    """Every image of the packed inputs side by side (input | target for paired data), captioned with its key
    and the sample's class/attributes when it has them.

    Args:
        sample: ``{'inputs': {key: uint8 [C, H, W] RGB image or a label tensor}, 'data_samples': ...}``
            (``PackGANInputs``).
        dataset_meta: ``classes`` (names of class ids or attributes).

    Returns:
        uint8 BGR [H', W', 3], each image enlarged (nearest, whole factor) to >= 512 px on its long side.

    Raises:
        ValueError: the inputs hold no image.
    """
    inputs = sample["inputs"]
    if not isinstance(inputs, dict):
        inputs = {"img": inputs}
    classes = [str(c) for c in dataset_meta.get("classes") or ()]
    images = {k: v for k, v in inputs.items() if hasattr(v, "shape") and len(v.shape) == 3}
    labels = [f"{k}: {_label_text(v, classes)}" for k, v in inputs.items() if k not in images]
    if not images:
        raise ValueError(f"gan browse: the packed inputs {sorted(inputs)} hold no image [C, H, W]")
    panels, titles = [], []
    for key, value in images.items():
        img = packed_image(value, rgb=True, where=f"gan browse: inputs[{key!r}]")
        panels.append(enlarge(img, upscale_factor(img.shape), nearest=True))
        titles.append(f"{key} {tuple(value.shape[1:])}")
    if labels:
        titles[0] += " | " + "; ".join(labels)
    return side_by_side(panels, titles)
