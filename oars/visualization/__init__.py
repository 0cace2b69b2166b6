"""Drawing utilities shared by every task: palettes, mask painting, panel layouts, report plots."""

from .box_draw import draw_boxes
from .html_report import ReportSection, png_data_uri, render_html_report, write_html_report
from .layout import make_grid, side_by_side
from .palette import get_palette, save_label_png
from .plots import plot_confusion_matrix, plot_per_class_bars
from .pr_plot import plot_pr_curves
from .seg_draw import colorize_mask, draw_legend, overlay_mask

__all__ = [
    'ReportSection',
    'colorize_mask',
    'draw_boxes',
    'draw_legend',
    'get_palette',
    'make_grid',
    'overlay_mask',
    'plot_confusion_matrix',
    'plot_per_class_bars',
    'plot_pr_curves',
    'png_data_uri',
    'render_html_report',
    'save_label_png',
    'side_by_side',
    'write_html_report',
]
