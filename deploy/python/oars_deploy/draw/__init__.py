"""Drawing primitives shared by evaluation pictures, tools/infer.py and the deploy predictor (NumPy and OpenCV
only): boxes with captions, binary masks as colours and overlays, legends, palettes, panel layouts, label PNGs.

The picture of one kind's result (a detection sample, a label map with its legend, instance masks, a timeline of
segments) is drawn with these by the kind's plug-in (``oars_deploy.predictors.<kind>.draw``). Images are BGR uint8
(OpenCV), palettes RGB rows. Plots (matplotlib) and the HTML report stay in ``oars.visualization``, which the
runtime does not need.
"""

from oars_deploy.draw.boxes import draw_boxes
from oars_deploy.draw.label_png import save_label_png
from oars_deploy.draw.layout import make_grid, side_by_side
from oars_deploy.draw.masks import colorize_mask, draw_legend, overlay_mask
from oars_deploy.draw.palette import get_palette

__all__ = [
    "colorize_mask",
    "draw_boxes",
    "draw_legend",
    "get_palette",
    "make_grid",
    "overlay_mask",
    "save_label_png",
    "side_by_side",
]
