"""What every edge format's writer is: the files it makes from the exported ONNX graph, the runtime backend that
runs them, and the packages it needs.

Why one small class: the export pipeline (:func:`oars.pipelines.export.export_model`) treats every format the same
way (stage the files, check their parity with ONNX Runtime, rename them into place), so a format only says how its
files are written; adding one is a module with a writer and a line in :data:`oars.export.formats.FORMATS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oars.export.errors import ExportError
from oars.extras import OARS_EXTRAS, is_installed

# the formats that can run any graph ONNX Runtime runs: named when another format refuses an operator
ALWAYS_AVAILABLE = "onnx (ONNX Runtime)"


@dataclass
class FormatJob:
    """The inputs of one format's writer.

    ``onnx_path``: the graph to convert (in the staging folder; its name ends in .onnx); ``fp32_onnx_path``: the
    FP32 graph (the same file unless the core reduced the precision); ``out_dir``: the staging folder, where the
    writer puts its files; ``precision``: fp32 / fp16 / int8 as the user asked; ``calibration``: the INT8
    calibration batches (graph input arrays) for a writer that quantises itself; ``input_name``: the graph input
    they feed; ``settings``: the format's own section of the config's export section (``export.<format>``, e.g.
    ``export.ort.target_platform``), empty when the config has none.
    """

    onnx_path: str
    fp32_onnx_path: str
    out_dir: str
    precision: str = "fp32"
    calibration: Sequence[Any] = field(default_factory=list)
    input_name: str = "image"
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class FormatFiles:
    """What a writer wrote: the main model file (deploy.yaml names it), the other files of the format, and notes
    for the user (a mobile-usability verdict), all in the job's ``out_dir``."""

    main: str
    others: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """Every file name, the main one first."""
        return [self.main, *self.others]


class FormatWriter:
    """One export format. Subclasses set the class attributes and implement :meth:`write`.

    ``name``: the ``--format`` value; ``backend``: deploy.yaml's ``model.backend`` (what runs the files);
    ``infer_backend``: ``oars-infer --backend`` that runs them (the parity check runs the same one);
    ``model_key``: the key of deploy.yaml's ``model`` section naming the main file; ``packages``: the Python
    modules the writer imports (``int8_packages``: those it imports for --int8 only); ``reduces_precision``: True
    when the writer applies --half / --int8 itself from the FP32 graph, False when it converts the
    reduced-precision ONNX graph the core writes.
    """

    name: str = ""
    backend: str = ""
    infer_backend: str = ""
    model_key: str = ""
    packages: tuple[str, ...] = ()
    int8_packages: tuple[str, ...] = ()
    settings_keys: tuple[str, ...] = ()  # the keys its ``export.<name>`` section may hold (FormatJob.settings)
    reduces_precision: bool = False

    def require(self, precision: str = "fp32") -> None:
        """Fail before any work when a package the format needs at ``precision`` is missing (one line with the pip
        command), without importing it.

        Raises:
            ExportError: ``--format openvino needs openvino, ...: pip install ...``.
        """
        for module in self.packages:
            if not is_installed(module):
                raise ExportError(OARS_EXTRAS.message(module, f"--format {self.name}"))
        for module in self.int8_packages if precision == "int8" else ():
            if not is_installed(module):
                raise ExportError(OARS_EXTRAS.message(module, f"--format {self.name} --int8"))

    def check_settings(self, settings: Mapping[str, Any]) -> None:
        """Refuse a bad value in the format's ``export.<name>`` section before any work (the keys are checked
        against :attr:`settings_keys` by the caller); the default accepts every value.

        Raises:
            ExportError: a value the format cannot use, naming the key and what it accepts.
        """

    def write(self, job: FormatJob) -> FormatFiles:
        """Write the format's files of ``job.onnx_path`` into ``job.out_dir``.

        Raises:
            ExportError: the format cannot hold the graph (naming the operator) or its converter failed.
        """
        raise NotImplementedError

    def refuse_operators(self, operators: Sequence[str], why: str = "") -> ExportError:
        """The one message for operators this format lacks: it names them and the format that holds the graph."""
        ops = ", ".join(sorted(set(operators)))
        return ExportError(f"--format {self.name} cannot hold operator(s) {ops} of this graph{why}; export it with "
                           f"--format {ALWAYS_AVAILABLE}, which runs every operator of the exported graph")


def operators_in(text: str, known: Sequence[str]) -> list[str]:
    """The names of ``known`` operators (ONNX op types, with or without a domain) that a converter's message
    mentions as words: how an unsupported operator is found in messages whose wording changes between versions."""
    found = []
    for op in known:
        short = op.split(":")[-1]
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(short)}(?![A-Za-z0-9_])", text):
            found.append(op)
    return found
