"""The settings of post-training quantisation as a variant of the compression table (``tools/compress.py --method
ptq``): ``ptq_defaults.yaml`` < the config's ``compress.ptq`` < the command line, checked before anything slow.

The run (the INT8 export of ``tools/export.py --int8``, evaluated as deployed) is :mod:`oars.pipelines.compress.ptq`.
"""

from __future__ import annotations

import os.path as osp

from mmengine.config import Config

from oars.errors import OarsError
from oars.export.precision import CALIB_METHODS

from .qat import merge_settings

DEFAULTS_FILE = osp.join(osp.dirname(__file__), "ptq_defaults.yaml")


def ptq_options(cfg: Config, options: dict | None) -> dict:
    """The PTQ settings: ``ptq_defaults.yaml`` < the config's ``compress.ptq`` < ``options`` (as
    :func:`oars.compress.qat.qat_options`), checked.

    Raises:
        OarsError: no calibration folder, or an unknown setting / calibration method (named).
    """
    opts = merge_settings(cfg, options, DEFAULTS_FILE, "ptq", "PTQ")
    if not opts["calib_dir"]:
        raise OarsError(f"{cfg.filename}: --method ptq calibrates the INT8 graph on files like the deployment "
                        "data (images; videos for a clip classifier): give --calib-dir DIR (or "
                        "compress.ptq.calib_dir)")
    if not osp.isdir(str(opts["calib_dir"])):
        raise OarsError(f"--calib-dir {opts['calib_dir']}: not a folder (expected a folder of calibration files: "
                        "images, or videos for a clip classifier)")
    if opts["calib_method"] not in CALIB_METHODS:
        raise OarsError(f"{cfg.filename}: compress.ptq.calib_method must be one of {list(CALIB_METHODS)}, "
                        f"got {opts['calib_method']!r}")
    return opts


__all__ = ["ptq_options"]
