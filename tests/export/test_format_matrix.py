"""Which model runs where: every family (one shrunk config each, random weights, tiny inputs) exported to every
format (onnx + oars.export.formats.FORMATS), each cell "agreed <agreement>" (deploy.yaml's parity), "refused:
<operator>" or "failed: <reason>" (tools/format_matrix.py, the code ``make demo-edge`` runs too).

The table lives in docs/deploy.md between ``<!-- format-matrix:start -->`` and ``<!-- format-matrix:end -->``:
``OARS_WRITE_FORMAT_MATRIX=1 pytest tests/export/test_format_matrix.py -m slow`` writes it; otherwise the test fails
when the doc's table is not what it measured (a stale table, or a format that broke)."""

from __future__ import annotations

import os
import os.path as osp
import re
import sys

import pytest
from demo_utils import ROOT, load_tool, random_checkpoint
from export_cases import shrunk_export_case
from format_cases import gan_case

DOC = osp.join(ROOT, "docs", "deploy.md")
RAW = "export.postprocess=raw"
matrix = load_tool("format_matrix")


def _image_case(config: str, size: int = 64, **kwargs):
    def build(folder: str):
        cfg, ckpt = shrunk_export_case(osp.join(ROOT, config), folder, size=size, **kwargs)
        return cfg, ckpt, None
    return build


def _two_stage(name: str):
    def build(folder: str):
        sys.path.append(osp.join(ROOT, "tests", "detection", "export"))
        from two_stage_cases import build_case, save_checkpoint

        cfg, model = build_case(name, size=64)
        return cfg, save_checkpoint(model, folder), None
    return build


def _video(name: str):
    def build(folder: str):
        from vid_export_cases import checkpoint, video_config

        cfg = video_config(folder, name)
        return cfg, checkpoint(cfg), None
    return build


def _features(folder: str):
    from vid_feature_cases import checkpoint, feature_config

    cfg = feature_config(folder, "attention_cluster")
    return cfg, checkpoint(cfg), None


def _bmn(folder: str):
    from mmengine.registry import DefaultScope
    from video_segments_export import BMN_CFG, SHRINK, SNIPPET, STRIDE, TOP_K, bmn_checkpoint, tiny_recognizer_config

    from oars.config import load_config

    rcfg = tiny_recognizer_config(_path(folder))
    weights = random_checkpoint(rcfg, [], folder)
    with DefaultScope.overwrite_default_scope("video"):
        ckpt = bmn_checkpoint(_path(folder))
    options = {"recognizer_config": rcfg, "recognizer_weights": weights, "snippet": SNIPPET, "stride": STRIDE,
               "top_k": TOP_K}
    return load_config(BMN_CFG, SHRINK), ckpt, options


def _path(folder: str):
    from pathlib import Path

    return Path(folder)


# one row per family: its name in the table and how its shrunk case is built in a folder
FAMILIES = {
    "U-Net": _image_case("configs/segmentation/unet/unet_demo_shapes.yaml", standardise_logits=True),
    "DeepLabV3": _image_case("configs/segmentation/deeplabv3/deeplabv3_r50_40k_voc12.yaml", standardise_logits=True),
    "ICNet": _image_case("configs/segmentation/icnet/icnet_r18-d8_80k_cityscapes.yaml", standardise_logits=True),
    "BiSeNetV2": _image_case("configs/segmentation/bisenetv2/bisenetv2_fcn_160k_cityscapes.yaml",
                             standardise_logits=True),
    "YOLOv3": _image_case("configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml"),
    "RetinaNet": _image_case("configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml"),
    "FCOS": _image_case("configs/detection/fcos/fcos_r18_fpn_demo_shapes.yaml"),
    "SSDLite": _image_case("configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml"),
    # export.postprocess: raw: the heads' maps only, decoded by the runtime (what ncnn holds)
    "YOLOv3 (postprocess: raw)": _image_case("configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml",
                                             overrides=[RAW]),
    "RetinaNet (postprocess: raw)": _image_case("configs/detection/retinanet/retinanet_r50_fpn_1x_coco.yaml",
                                                overrides=[RAW]),
    "FCOS (postprocess: raw)": _image_case("configs/detection/fcos/fcos_r18_fpn_demo_shapes.yaml", overrides=[RAW]),
    "SSDLite (postprocess: raw)": _image_case("configs/detection/ssd/ssdlite_mobilenetv3_320_coco.yaml",
                                              overrides=[RAW]),
    "Faster R-CNN": _two_stage("faster"),
    "Mask R-CNN": _two_stage("mask"),
    "TSM": _video("tsm"),
    "R(2+1)D": _video("r2plus1d"),
    "AttentionCluster (features)": _features,
    "BMN": _bmn,
    "CGAN generator": lambda folder: gan_case(folder, "cgan"),
    "pix2pix generator": lambda folder: gan_case(folder, "pix2pix"),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Every family exported to every format: ``({family: {format: cell}}, formats)``."""
    formats = matrix.format_names()
    root = tmp_path_factory.mktemp("format_matrix")
    rows = {}
    for name, build in FAMILIES.items():
        folder = str(root / f"case_{len(rows)}")
        os.makedirs(folder, exist_ok=True)
        cfg, ckpt, options = build(folder)
        rows[name] = matrix.export_all(name, cfg, ckpt, str(root / "exports"), formats, options)
    return rows, formats


@pytest.mark.slow
def test_every_family_exports_to_onnx_and_the_doc_table_is_the_measured_one(measured):
    rows, formats = measured
    table = matrix.markdown_table(rows, formats)
    print("\n" + table)
    for name, cells in rows.items():
        assert cells["onnx"] == "self-check passed", (name, cells)  # every family's reference graph exports
        for fmt, cell in cells.items():
            assert cell.startswith(("agreed ", "refused: ", "disagreed: ", "failed: ", "self-check")), (name, fmt,
                                                                                                          cell)
    with open(DOC) as f:
        text = f.read()
    if os.environ.get("OARS_WRITE_FORMAT_MATRIX") == "1":
        with open(DOC, "w") as f:
            f.write(matrix.with_table(text, table))
        return
    stale = _stale_cells(matrix.table_in(text), table)
    assert not stale, ("docs/deploy.md's format table is stale; rerun with OARS_WRITE_FORMAT_MATRIX=1 to write the "
                       f"measured one: {stale}")


_NUMBER = re.compile(r"\d+\.\d+")
_PATH = re.compile(r"/\S+")


def _stale_cells(doc: str, measured: str, tolerance: float = 0.01) -> list[tuple[str, str]]:
    """The cells of ``doc``'s table that ``measured`` contradicts: another kind of cell (agreed / refused /
    failed ...), another operator or message (paths aside: they name this run's temporary folders), or an agreement
    more than ``tolerance`` away (kernels may round differently from one CPU to another; a "disagreed" cell's value
    is not compared, only that the format still disagrees on that output)."""
    def cells(table: str) -> list[str]:
        return [cell.strip() for line in table.strip().splitlines() for cell in line.strip("|").split(" | ")]

    def shape(cell: str) -> str:
        return _NUMBER.sub("N", _PATH.sub("<path>", cell))

    ours, theirs = cells(doc), cells(measured)
    if len(ours) != len(theirs):
        return [("table", f"{len(ours)} cells in the doc, {len(theirs)} measured")]
    stale = []
    for a, b in zip(ours, theirs):
        numbers = [[float(x) for x in _NUMBER.findall(_PATH.sub("", cell))] for cell in (a, b)]
        # a disagreement on random weights is the finding, not its exact value
        close = a.startswith("disagreed:") or all(abs(x - y) <= tolerance for x, y in zip(*numbers))
        if shape(a) != shape(b) or not close:
            stale.append((a, b))
    return stale


def test_stale_cells_tolerates_rounding_and_paths_only():
    doc = "| model | onnx | ort |\n|---|---|---|\n| U | agreed 1.000 | failed: no file /tmp/a/x.onnx |\n"
    assert _stale_cells(doc, doc.replace("1.000", "0.995").replace("/tmp/a", "/tmp/b")) == []
    assert _stale_cells(doc, doc.replace("agreed 1.000", "agreed 0.950"))
    assert _stale_cells(doc, doc.replace("agreed 1.000", "refused: ArgMax"))
    assert _stale_cells(doc, doc.replace("no file", "bad file"))
    disagreed = doc.replace("agreed 1.000", "disagreed: scores 0.807 < 0.999")
    assert _stale_cells(disagreed, disagreed.replace("0.807", "0.790")) == []
    assert _stale_cells(disagreed, doc)


def test_table_markers_and_cells():
    rows = {"A": {"onnx": "self-check passed", "x": "agreed 1.000"}, "B": {"onnx": "self-check passed",
                                                                          "x": "refused: RoiAlign"}}
    table = matrix.markdown_table(rows, ["onnx", "x"])
    assert table == ("| model | onnx | x |\n|---|---|---|\n| A | self-check passed | agreed 1.000 |\n"
                     "| B | self-check passed | refused: RoiAlign |\n")
    doc = f"intro\n{matrix.START}\nold\n{matrix.END}\nrest\n"
    new = matrix.with_table(doc, table)
    assert new == f"intro\n{matrix.START}\n{table}{matrix.END}\nrest\n" and matrix.table_in(new) == table
    with pytest.raises(ValueError, match=r"^docs/deploy.md has no <!-- format-matrix:start --> \.\.\. "):
        matrix.table_in("no markers here")
    assert matrix.REFUSED.search("--format litert cannot hold operator(s) RoiAlign of this graph (x)").group(1) \
        == "RoiAlign"
    assert matrix.error_cell("--format x cannot hold operator(s) ArgMax, Where of this graph (...)") == \
        "refused: ArgMax, Where"
    assert matrix.error_cell("--format litert: the litert FP32 model agrees with ONNX Runtime FP32 on 'label' only "
                             "0.6575 (needed 0.99; --min-agreement sets the threshold); ...") == \
        "disagreed: label 0.657 < 0.99"
    assert matrix.error_cell("--format y: converting failed") == "failed: --format y: converting failed"
    assert matrix.error_cell("/tmp/pytest-7/x/cgan.yaml: GAN generators export to --format onnx only (got 'ort')") \
        == "failed: GAN generators export to --format onnx only (got 'ort')"
    assert matrix.format_names()[0] == "onnx" and "litert" in matrix.format_names()


def test_cli_refuses_missing_files_and_unknown_formats(tmp_path, capsys):
    with pytest.raises(SystemExit) as code:
        matrix.main(["-m", "U-Net", "nope.yaml", "nope.pth", "-o", str(tmp_path)])
    assert code.value.code == 2 and "--model U-Net: config nope.yaml not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        matrix.main(["-m", "U-Net", "a", "b", "-o", str(tmp_path), "--formats", "onnx", "tflite"])
    assert "--formats: unknown ['tflite']" in capsys.readouterr().err
