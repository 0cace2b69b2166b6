"""Drawing utilities shared by every task: palettes, mask painting, panel layouts, report plots."""

from .layout import make_grid, side_by_side
from .palette import get_palette
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
    'side_by_side',
]
