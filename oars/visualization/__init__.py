"""Report plots (matplotlib) and the HTML report.

The drawing of pictures (palettes, masks, boxes, panel layouts, label PNGs) is ``oars_deploy.draw``: the deploy
predictor draws the same pictures without the training packages.
"""

from .html_report import ReportSection, png_data_uri, render_html_report, write_html_report
from .plots import plot_confusion_matrix, plot_per_class_bars
from .pr_plot import plot_pr_curves

__all__ = [
    'ReportSection',
    'plot_confusion_matrix',
    'plot_per_class_bars',
    'plot_pr_curves',
    'png_data_uri',
    'render_html_report',
    'write_html_report',
]
