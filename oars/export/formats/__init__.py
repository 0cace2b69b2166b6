"""Edge export formats written from the exported ONNX graph, each checked against ONNX Runtime (one parity rule,
:mod:`oars.export.formats.parity`) before its files are put in place (:mod:`oars.export.formats.stage`).

:data:`FORMATS` maps a ``tools/export.py --format`` value to its writer (one small module per format); ``onnx``
and ``tensorrt`` are the core's own and are not listed here. Importing this package imports no converter: each
writer imports its packages when it writes.
"""

from __future__ import annotations

from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter
from oars.export.formats.litert import LITERT
from oars.export.formats.mnn import MNN_FORMAT
from oars.export.formats.ncnn import NCNN
from oars.export.formats.openvino import OPENVINO
from oars.export.formats.ort_mobile import ORT_MOBILE

FORMATS: dict[str, FormatWriter] = {OPENVINO.name: OPENVINO, ORT_MOBILE.name: ORT_MOBILE, NCNN.name: NCNN,
                                    MNN_FORMAT.name: MNN_FORMAT, LITERT.name: LITERT}

__all__ = ["FORMATS", "FormatFiles", "FormatJob", "FormatWriter"]
