"""Drawing utilities shared by every task: palettes, mask painting, panel layouts, report plots."""

from .layout import make_grid, side_by_side
from .palette import get_palette, save_label_png
from .plots import plot_confusion_matrix, plot_per_class_bars
from .seg_draw import colorize_mask, draw_legend, overlay_mask

__all__ = [
    'colorize_mask',
    'draw_legend',
    'get_palette',
    'make_grid',
    'overlay_mask',
    'plot_confusion_matrix',
    'plot_per_class_bars',
    'save_label_png',
    'side_by_side',
]
