"""Drawing shared by evaluation pictures, tools/infer.py and the deploy predictor (NumPy and OpenCV only).

Images are BGR uint8 (OpenCV), palettes RGB rows. Plots (matplotlib) and the HTML report stay in
``oars.visualization``, which the runtime does not need.
"""

from oars_deploy.draw.boxes import draw_boxes
from oars_deploy.draw.detection import draw_detection_sample
from oars_deploy.draw.instance_masks import draw_instance_masks, instance_index_map
from oars_deploy.draw.label_png import save_label_png
from oars_deploy.draw.layout import make_grid, side_by_side
from oars_deploy.draw.masks import colorize_mask, draw_legend, overlay_mask
from oars_deploy.draw.palette import get_palette
from oars_deploy.draw.segmentation import draw_sample

__all__ = [
    "colorize_mask",
    "draw_boxes",
    "draw_detection_sample",
    "draw_instance_masks",
    "draw_legend",
    "draw_sample",
    "get_palette",
    "instance_index_map",
    "make_grid",
    "overlay_mask",
    "save_label_png",
    "side_by_side",
]
