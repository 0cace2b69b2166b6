"""Paint semantic masks: colour them, blend them over images, and label the colours with a legend.

Images are BGR uint8 (OpenCV convention, as in the data pipeline); palettes are RGB rows
(see ``oars_deploy.draw.palette.get_palette``) and are flipped to BGR here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import cv2
import numpy as np

from oars_deploy.draw.palette import get_palette


def _check_mask(mask: np.ndarray, num_classes: int, ignore_index: int | None) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f'mask must be a 2-D array of class ids (H, W), got shape {tuple(mask.shape)}')
    if not np.issubdtype(mask.dtype, np.integer):
        raise ValueError(f'mask must hold integer class ids, got dtype {mask.dtype}')
    valid = (mask >= 0) & (mask < num_classes)
    if ignore_index is not None:
        valid |= mask == ignore_index
    if not valid.all():
        bad = np.unique(mask[~valid])[:10].tolist()
        raise ValueError(f'mask holds ids {bad} outside [0, {num_classes}) and not the ignore index '
                         f'{ignore_index}; the palette has {num_classes} colours')
    return mask


def colorize_mask(mask: np.ndarray, palette: Sequence[Sequence[int]] | np.ndarray,
                  ignore_index: int | None = 255) -> np.ndarray:
    """Map an (H, W) class-id mask to an (H, W, 3) BGR uint8 image; ``ignore_index`` pixels are black."""
    pal = get_palette(len(palette), palette)
    mask = _check_mask(mask, len(pal), ignore_index)
    lut = np.zeros((len(pal) + 1, 3), dtype=np.uint8)  # last row (black) is for ignored pixels
    lut[: len(pal)] = pal[:, ::-1]  # RGB -> BGR
    idx = mask.astype(np.int64)
    if ignore_index is not None:
        idx = np.where(mask == ignore_index, len(pal), idx)
    return lut[idx]


def overlay_mask(img_bgr: np.ndarray, mask: np.ndarray, palette: Sequence[Sequence[int]] | np.ndarray,
                 alpha: float = 0.5, ignore_index: int | None = 255, colour: np.ndarray | None = None) -> np.ndarray:
    """Blend class colours over a BGR image: ``round((1 - alpha) * img + alpha * colour)``.

    ``ignore_index`` pixels keep the image unchanged. ``colour``: :func:`colorize_mask` of ``mask`` when the
    caller has it already (a picture that shows the mask too: it is not computed twice). Returns a new uint8
    image.
    """
    img = np.asarray(img_bgr)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f'img_bgr must be an (H, W, 3) uint8 image, got shape {tuple(img.shape)} '
                         f'dtype {img.dtype}')
    if np.shape(mask) != img.shape[:2]:
        raise ValueError(f'mask shape {tuple(np.shape(mask))} differs from image size {img.shape[:2]}')
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f'alpha must be in [0, 1], got {alpha}')
    colour = (colorize_mask(mask, palette, ignore_index) if colour is None else colour).astype(np.float32)
    blended = np.rint((1.0 - alpha) * img.astype(np.float32) + alpha * colour)
    out = np.clip(blended, 0, 255).astype(np.uint8)
    if ignore_index is not None:
        keep = np.asarray(mask) == ignore_index
        out[keep] = img[keep]
    return out


def draw_legend(img: np.ndarray, class_names: Sequence[str], palette: Sequence[Sequence[int]] | np.ndarray,
                present_only_ids: Iterable[int] | None = None) -> np.ndarray:
    """Return ``img`` with a legend panel (colour swatch + class name per row) appended on the right.

    ``present_only_ids`` (e.g. ``np.unique(mask)``) limits the legend to those classes; ids outside
    ``[0, len(class_names))``, such as an ignore index, are skipped. The image is padded at the bottom
    if the legend is taller. Accepts BGR or grayscale uint8 images; returns BGR.
    """
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 3)):
        raise ValueError(f'img must be an (H, W) or (H, W, 3) uint8 image, got shape {tuple(img.shape)} '
                         f'dtype {img.dtype}')
    if img.ndim == 2 or img.shape[2] == 1:
        img = cv2.cvtColor(img.reshape(img.shape[:2]), cv2.COLOR_GRAY2BGR)
    names = list(class_names)
    if len(names) != len(palette):
        raise ValueError(f'draw_legend: {len(names)} class names but the palette has {len(palette)} colours')
    pal = get_palette(len(names), palette)
    ids = range(len(names)) if present_only_ids is None else sorted(
        {int(i) for i in np.asarray(list(present_only_ids)).ravel() if 0 <= int(i) < len(names)})

    font, scale, thick = cv2.FONT_HERSHEY_SIMPLEX, 0.4, 1
    (_, text_h), _ = cv2.getTextSize('Ag', font, scale, thick)
    row_h, sw, margin = max(text_h + 8, 14), 12, 6
    widths = [cv2.getTextSize(names[i], font, scale, thick)[0][0] for i in ids]
    panel_w = margin * 3 + sw + max(widths, default=0)
    panel_h = max(img.shape[0], margin * 2 + row_h * len(widths))
    out = np.zeros((panel_h, img.shape[1] + panel_w, 3), dtype=np.uint8)
    out[: img.shape[0], : img.shape[1]] = img
    x0 = img.shape[1] + margin
    for row, i in enumerate(ids):
        y = margin + row * row_h
        colour = tuple(int(c) for c in pal[i, ::-1])
        cv2.rectangle(out, (x0, y + 1), (x0 + sw - 1, y + row_h - 3), colour, thickness=-1)
        cv2.rectangle(out, (x0, y + 1), (x0 + sw - 1, y + row_h - 3), (255, 255, 255), thickness=1)
        cv2.putText(out, names[i], (x0 + sw + margin, y + (row_h + text_h) // 2 - 1), font, scale,
                    (255, 255, 255), thick, cv2.LINE_AA)
    return out
