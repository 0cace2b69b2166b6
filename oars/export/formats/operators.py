"""Which ONNX operators each edge format cannot hold, checked against the exported graph before its converter runs.

Why a table and a check before converting: some converters do not fail on an operator their runtime lacks. pnnx
(``--format ncnn``) writes NonMaxSuppression, TopK or a comparison as a layer type ncnn has no implementation of
(``torch.gt``, ``TopK``), and the files only fail when ncnn loads them; ultralytics' users got NCNN models that
broke without a word. A writer calls :func:`check_operators` first, so the refusal is one message naming the
operators and the formats that can hold them, before any file is written. The sets were found by converting one
small graph per operator with the wheels the ``edge`` extra pins and loading the result; an operator missing here
is still caught by the writer after converting (ncnn: a layer type ncnn cannot create), with the same message.
"""

from __future__ import annotations

from collections.abc import Iterable

from oars.export.errors import ExportError
from oars.export.formats.base import ALWAYS_AVAILABLE
from oars.export.formats.openvino import graph_operators

# --format value -> ONNX operator types (default domain) its converter or runtime lacks; an operator of another
# domain (``com.example:FancyOp``) is lacked by every format of this table
UNSUPPORTED_OPS: dict[str, frozenset[str]] = {
    # pnnx converts these to layer types ncnn cannot create (ArgMax/ArgMin: ncnn's Python wheel is built without
    # them; the comparisons become torch.gt/... and Tile torch.tile); NMS, RoIAlign and TopK stay out of ncnn
    # graphs: the runtime's NumPy NMS does that work after the raw outputs
    "ncnn": frozenset({
        "NonMaxSuppression", "RoiAlign", "TopK", "ArgMax", "ArgMin", "Greater", "Less", "Equal", "GreaterOrEqual",
        "LessOrEqual", "And", "Or", "Xor", "Not", "Where", "GatherElements", "ScatterND", "ScatterElements",
        "NonZero", "CumSum", "Tile"}),
    # MNN's converter and runtime run every default-domain operator oars' exports contain (its NMS, TopK, ArgMax
    # and RoIAlign included; parity with ONNX Runtime checks the result)
    "mnn": frozenset(),
}
# formats that run every default-domain operator of the exported graph: ONNX Runtime itself, its mobile format,
# and OpenVINO (a conversion rule for each; its writer names any it lacks)
FULL_ONNX_FORMATS = ("ort", "openvino")
# the post-processing operators a model can leave to the runtime (named with a hint when a format refuses them)
POSTPROCESS_OPS = ("NonMaxSuppression", "RoiAlign", "TopK")


def lacking_operators(fmt: str, operators: Iterable[str]) -> list[str]:
    """The operators of ``operators`` (``Op`` or ``domain:Op``) that ``fmt`` cannot hold, sorted."""
    lacks = UNSUPPORTED_OPS.get(fmt, frozenset())
    return sorted({op for op in operators if ":" in op or op in lacks})


def formats_holding(operators: Iterable[str]) -> list[str]:
    """The ``--format`` values that hold every one of ``operators``: ``onnx`` always; for default-domain operators
    also :data:`FULL_ONNX_FORMATS` and each format of :data:`UNSUPPORTED_OPS` that does not lack them."""
    ops = set(operators)
    if any(":" in op for op in ops):
        return [ALWAYS_AVAILABLE]
    return [ALWAYS_AVAILABLE, *FULL_ONNX_FORMATS, *(f for f, lacks in UNSUPPORTED_OPS.items() if not ops & lacks)]


def refusal(fmt: str, operators: Iterable[str], why: str) -> ExportError:
    """The one message for operators ``fmt`` cannot hold: it names them, why, and the formats that hold them.

    Args:
        fmt: the ``--format`` value.
        operators: the operators it lacks (ONNX op types, or the converter's layer types when that is all that is
            known).
        why: the reason in a few words (``pnnx writes no ncnn layer for them``).
    """
    ops = sorted(set(operators))
    holders = [f for f in formats_holding(ops) if f != fmt]
    named = holders[0] if len(holders) == 1 else f"{', '.join(holders[:-1])} or {holders[-1]}"
    post = set(ops) & set(POSTPROCESS_OPS)
    hint = (f"; or export the graph without {', '.join(sorted(post))}, if the model's export can leave them to the "
            "runtime (e.g. export.postprocess=raw: the graph ends at the raw head outputs, the runtime decodes them "
            "and runs NMS)") if post else ""
    return ExportError(f"--format {fmt} cannot hold operator(s) {', '.join(ops)} of this graph ({why}); export it "
                       f"with --format {named}, which hold{'s' if len(holders) == 1 else ''} them{hint}")


def check_operators(fmt: str, onnx_path: str, why: str) -> None:
    """Refuse ``onnx_path`` before converting it when its graph holds an operator ``fmt`` lacks.

    Raises:
        ExportError: :func:`refusal`'s message, naming every such operator.
    """
    lacking = lacking_operators(fmt, graph_operators(onnx_path))
    if lacking:
        raise refusal(fmt, lacking, why)
