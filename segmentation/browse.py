"""``tools/browse_dataset.py`` pictures of segmentation samples: the augmented image | its label map in class
colours | the label over the image, with a legend of the classes present (pipeline pixels, as the model gets them)."""

from __future__ import annotations

import numpy as np

from oars.visualization.browse import enlarge, packed_image, upscale_factor
from oars_deploy.draw import colorize_mask, draw_legend, get_palette, overlay_mask, side_by_side


def draw_pipeline_sample(sample: dict, dataset_meta: dict) -> np.ndarray:
    """image | label | overlay of one packed sample, with a legend.

    Args:
        sample: ``{'inputs': uint8 [3, H, W] BGR, 'data_samples': SegDataSample}`` (``PackSegInputs``);
            ``gt_sem_seg.data`` is [1, H, W] class ids, ``ignore_index`` (255 by default) where not labelled.
        dataset_meta: ``classes``, ``palette`` (RGB rows) and ``ignore_index``.

    Returns:
        uint8 BGR [H', W', 3]: panels enlarged to >= 512 px on their long side (the label map with nearest
        neighbours), ignored pixels black in the label panel and untouched in the overlay.

    Raises:
        ValueError: a label value that is neither a class id nor the ignore index (the usual cause of a NaN
            loss), naming the values and the image.
    """
    data = sample["data_samples"]
    img = packed_image(sample["inputs"], where="segmentation browse: inputs")
    classes = [str(c) for c in dataset_meta.get("classes") or ()]
    palette = get_palette(len(classes), dataset_meta.get("palette"))
    ignore = int(dataset_meta.get("ignore_index", 255))
    panels, titles = [img], ["image"]
    label = None
    if "gt_sem_seg" in data:
        label = data.gt_sem_seg.data
        label = np.asarray(label.detach().cpu() if hasattr(label, "detach") else label).reshape(label.shape[-2:])
        values = np.unique(label)
        bad = [int(v) for v in values if not (0 <= v < len(classes) or v == ignore)]
        if bad:
            raise ValueError(f"segmentation browse: {data.metainfo.get('seg_map_path', '?')}: label values {bad} "
                             f"are neither class ids [0, {len(classes)}) nor ignore_index {ignore}")
    factor = upscale_factor(img.shape)
    panels[0] = enlarge(img, factor)
    if label is not None:
        big = enlarge(label.astype(np.uint8 if label.max(initial=0) < 256 else np.int32), factor, nearest=True)
        panels += [colorize_mask(big, palette, ignore), overlay_mask(panels[0], big, palette, 0.5, ignore)]
        titles += ["label", "overlay"]
    row = side_by_side(panels, titles)
    if label is None or not classes:
        return row
    return draw_legend(row, classes, palette, present_only_ids=np.unique(label))
