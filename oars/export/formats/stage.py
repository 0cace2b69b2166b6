"""Write one format's files beside the export, prove their parity, and only then put them under their names.

How the export stays atomic (as the ONNX files are, :func:`oars.pipelines.export.export_model`): the writer works
in a staging folder inside the output folder (named with the temporary-file prefix of
:mod:`oars_deploy.atomic`), the parity check runs the staged files with the runtime backend that will deploy them,
and :meth:`StagedFormat.commit` renames them into the output folder after the ONNX files. A failed writer or check
removes the staging folder: nothing of the format is left, and the ONNX files were never renamed into place.
"""

from __future__ import annotations

import os
import os.path as osp
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oars.export.formats.base import FormatFiles, FormatJob, FormatWriter
from oars.export.formats.parity import check_parity
from oars.export.spec import ExportSpec
from oars_deploy.atomic import TEMP_PREFIX


@dataclass
class StagedFormat:
    """A format's files in ``folder`` (staging), their parity section, and the deploy.yaml ``model`` keys."""

    writer: FormatWriter
    folder: str
    files: FormatFiles
    parity: dict
    written: list[str] = field(default_factory=list)

    def deploy_model(self) -> dict:
        """deploy.yaml ``model`` keys: ``format``, ``backend`` and the main file under the format's key."""
        return {"format": self.writer.name, "backend": self.writer.backend, self.writer.model_key: self.files.main}

    def commit(self, out_dir: str) -> list[str]:
        """Rename the staged files into ``out_dir`` (same file system: atomic per file); returns their paths."""
        for name in self.files.names:
            target = osp.join(out_dir, name)
            os.replace(osp.join(self.folder, name), target)
            self.written.append(target)
        return list(self.written)

    def discard(self) -> None:
        """Remove the staging folder (what was not committed)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def stage_format(writer: FormatWriter, out_dir: str, fp32_onnx: str, onnx_to_convert: str, onnx_name: str,
                 spec: ExportSpec, precision: str, calibration: Sequence[Any], check_inputs: Sequence[Any],
                 min_agreement: float | None = None, settings: Mapping[str, Any] | None = None) -> StagedFormat:
    """Write ``writer``'s files in a staging folder of ``out_dir`` and check their parity.

    Args:
        fp32_onnx: the FP32 graph (the reference of the parity check; what a writer that reduces precision itself
            converts).
        onnx_to_convert / onnx_name: the graph deploy.yaml runs (the FP32 one, or the core's reduced-precision
            graph) and its final file name (model.onnx, model_int8.onnx): a converter names its files after it.
        precision: fp32 / fp16 / int8; calibration: the INT8 calibration batches; check_inputs: the parity inputs
            (the self-check's, or the first calibration files for INT8: ``precision_check_inputs``).
        min_agreement: --min-agreement (None: the defaults of :mod:`oars.export.formats.parity`).
        settings: the format's section of the export config (``export.<format>``; :class:`FormatJob`).

    Raises:
        ExportError / ExportCheckError: the writer refused or failed, or parity is below the threshold; the staging
            folder is removed first.
    """
    from oars_deploy.backends import make_backend

    folder = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{writer.name}-", dir=out_dir)
    try:
        staged_fp32 = _link(fp32_onnx, osp.join(folder, "model.onnx"))
        staged_src = staged_fp32 if onnx_to_convert == fp32_onnx else _link(onnx_to_convert,
                                                                             osp.join(folder, onnx_name))
        job = FormatJob(onnx_path=staged_src, fp32_onnx_path=staged_fp32, out_dir=folder, precision=precision,
                        calibration=calibration, input_name=spec.input_name, settings=dict(settings or {}))
        files = writer.write(job)
        backend = make_backend(writer.infer_backend, folder, {writer.model_key: files.main}, "cpu")
        parity = check_parity(spec, writer.name, precision, staged_fp32, backend, check_inputs, min_agreement)
        return StagedFormat(writer, folder, files, parity)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _link(src: str, dst: str) -> str:
    """``dst`` as a hard link to ``src`` (a copy where the file system has none); returns ``dst``."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return dst
