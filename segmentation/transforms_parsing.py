"""Human-parsing pipeline steps: a flip that swaps left/right labels, and the edge targets of ACE2P.

``RandomFlipParsing`` goes where ``RandomFlip`` would; ``GenerateEdge`` after every geometric step (it reads the
final label map), before ``PackSegInputs``, which packs its ``gt_edge_map`` as ``gt_edge_map`` of the sample.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars.data.transforms.geometric import RandomFlip
from oars.errors import DataError
from segmentation.flip_pairs import check_flip_pairs, swap_label_pairs
from segmentation.registry import TRANSFORMS

# flip directions that mirror the picture (and so a person's left and right); 'diagonal' flips both axes, a
# rotation by 180 degrees, which keeps a person's left arm a left arm
MIRRORS = ("horizontal", "vertical")


def label_edges(label: np.ndarray, edge_width: int = 3, ignore_index: int = 255) -> np.ndarray:
    """Edge targets of a label map, by SCHP's rule (``generate_edge``), with ignored pixels kept out.

    1. For every pair of 8-neighbours - horizontal, vertical and both diagonal pairs - whose labels differ and are
       both not ``ignore_index``, one pixel of the pair is marked (SCHP's choice: the lower one of a vertical pair,
       the left one of a horizontal pair, the upper one of a diagonal pair).
    2. The marks are dilated by an ``edge_width`` x ``edge_width`` square (3: every pixel within one pixel, in the
       8-neighbourhood, of a marked one), so a boundary becomes a band 3-4 px wide.
    3. Pixels labelled ``ignore_index`` get ``ignore_index`` (SCHP leaves them 0 and counts them as non-edge; here
       they are left out of the edge loss, as the padding the data preprocessor adds).

    Args:
        label: [H, W] integer class ids.
        edge_width: odd side of the dilation square (1: no dilation).
        ignore_index: the label value that is not a class.

    Returns:
        uint8 [H, W]: 1 edge, 0 not, ``ignore_index`` ignored.
    """
    if label.ndim != 2:
        raise DataError(f"label_edges expects a [H, W] label map, got shape {label.shape}")
    if isinstance(edge_width, bool) or not isinstance(edge_width, int) or edge_width < 1 or edge_width % 2 == 0:
        raise DataError(f"GenerateEdge.edge_width must be an odd int >= 1 (3 as SCHP), got {edge_width!r}")
    lab = label.astype(np.int64, copy=False)
    ok = lab != ignore_index
    marks = np.zeros(lab.shape, dtype=np.uint8)

    def differ(a: tuple[slice, slice], b: tuple[slice, slice]) -> np.ndarray:
        return (lab[a] != lab[b]) & ok[a] & ok[b]

    top, bottom, left, right, every = slice(None, -1), slice(1, None), slice(None, -1), slice(1, None), slice(None)
    marks[bottom, every] |= differ((bottom, every), (top, every))  # vertical pair: mark the lower pixel
    marks[every, left] |= differ((every, left), (every, right))  # horizontal pair: mark the left pixel
    marks[top, left] |= differ((top, left), (bottom, right))  # "\" diagonal: mark the upper-left pixel
    marks[top, right] |= differ((top, right), (bottom, left))  # "/" diagonal: mark the upper-right pixel
    if edge_width > 1:
        marks = cv2.dilate(marks, np.ones((edge_width, edge_width), np.uint8))
    edges = marks.astype(np.uint8)
    edges[~ok] = ignore_index
    return edges


@TRANSFORMS.register_module()
class GenerateEdge:
    """``gt_edge_map`` (uint8 [H, W]: 1 edge, 0 not, ``ignore_index`` where the label is ignored) from
    ``gt_seg_map`` by :func:`label_edges`; the edge branch of ACE2P learns it.

    Args:
        edge_width: odd dilation width of the boundary marks (SCHP: 3).
        ignore_index: None: the dataset's (``results['ignore_index']``, else 255).
    """

    def __init__(self, edge_width: int = 3, ignore_index: int | None = None) -> None:
        label_edges(np.zeros((1, 1), np.uint8), edge_width)  # checks edge_width once, at build time
        self.edge_width = edge_width
        self.ignore_index = ignore_index

    def __call__(self, results: dict) -> dict:
        seg = results.get("gt_seg_map")
        if seg is None:
            raise KeyError("GenerateEdge needs results['gt_seg_map']; put LoadSegAnnotations before it")
        ignore = int(results.get("ignore_index", 255)) if self.ignore_index is None else int(self.ignore_index)
        results["gt_edge_map"] = label_edges(np.asarray(seg), self.edge_width, ignore)
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(edge_width={self.edge_width}, ignore_index={self.ignore_index})"


@TRANSFORMS.register_module()
class RandomFlipParsing(RandomFlip):
    """``RandomFlip`` that also exchanges the labels of each ``flip_pairs`` pair in ``gt_seg_map`` when it mirrors
    the image (horizontal or vertical; a diagonal flip is a 180-degree rotation and keeps left and right).

    Args:
        prob: flip probability.
        direction: horizontal (default), vertical or diagonal.
        flip_pairs: [[left, right], ...] class ids (LIP / CIHP: [[14, 15], [16, 17], [18, 19]]); empty or null:
            a plain RandomFlip.
    """

    def __init__(self, prob: float = 0.5, direction: str = "horizontal",
                 flip_pairs: Sequence[Sequence[int]] | None = None) -> None:
        super().__init__(prob, direction)
        try:
            self.flip_pairs = check_flip_pairs(flip_pairs, "RandomFlipParsing.flip_pairs")
        except ValueError as err:
            raise DataError(str(err)) from None

    def __call__(self, results: dict) -> dict:
        results = super().__call__(results)
        if results["flip"] and self.direction in MIRRORS and results.get("gt_seg_map") is not None:
            results["gt_seg_map"] = swap_label_pairs(np.asarray(results["gt_seg_map"]), self.flip_pairs)
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prob={self.prob}, direction={self.direction!r}, flip_pairs={self.flip_pairs})"
