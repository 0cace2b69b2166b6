"""GAN generators on the edge formats: pix2pix's generator (an image in) and CGAN's (noise + an int64 class label
in) exported to OpenVINO and MNN at FP32, parity checked against ONNX Runtime, and ``oars-infer --backend X`` writing
the pictures ONNX Runtime writes; TensorRT and reduced precision refused with one message each."""

from __future__ import annotations

import os.path as osp

import cv2
import numpy as np
import pytest
from format_cases import gan_case

from oars.export.errors import ExportError
from oars.pipelines.export import export_model
from oars_deploy.cli import run as infer_run
from oars_deploy.deploy_config import read_deploy_yaml
from oars_deploy.records import read_results

pytest.importorskip("openvino", reason="the edge extra (pip install -e '.[edge]': openvino) is not installed")
pytest.importorskip("MNN", reason="the edge extra (pip install -e '.[edge]': MNN) is not installed")


def _pictures(folder: str, names: list[str]) -> list[np.ndarray]:
    return [cv2.imread(osp.join(folder, n)).astype(int) for n in names]


@pytest.mark.parametrize("fmt", ["openvino", "mnn"])
def test_pix2pix_generator_agrees_and_infers_the_same_pictures(fmt, tmp_path):
    cfg, ckpt, _ = gan_case(str(tmp_path), "pix2pix")
    out = str(tmp_path / "out")
    parity = export_model(cfg, ckpt, out, fmt=fmt)["format"]["parity"]
    assert min(parity["agreement"].values()) >= 0.999
    assert read_deploy_yaml(osp.join(out, "deploy.yaml"))["model"]["format"] == fmt
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(3)
    for i in range(2):
        cv2.imwrite(str(images / f"im{i}.png"), rng.integers(0, 256, (32, 32, 3)).astype(np.uint8))
    pictures = {}
    for backend in ("onnxruntime", fmt):
        pred = str(tmp_path / f"pred_{backend}")
        infer_run(["--model-dir", out, "-i", str(images), "-o", pred, "--backend", backend])
        pictures[backend] = (read_results(pred), _pictures(pred, ["im0.png", "im1.png"]))
    (ref_records, ref), (records, got) = pictures["onnxruntime"], pictures[fmt]
    assert [r["images"] for r in records] == [r["images"] for r in ref_records]
    assert max(np.abs(a - b).max() for a, b in zip(got, ref)) <= 1  # uint8 rounding of the same float images


def test_cgan_generator_takes_its_int64_label_on_mnn(tmp_path):
    """MNN holds int64 as int32: the label input is narrowed to int32 for it (it read every input as float)."""
    cfg, ckpt, _ = gan_case(str(tmp_path), "cgan")
    out = str(tmp_path / "out")
    parity = export_model(cfg, ckpt, out, fmt="mnn")["format"]["parity"]
    assert min(parity["agreement"].values()) >= 0.999
    pictures = []
    for backend in ("onnxruntime", "mnn"):
        pred = str(tmp_path / f"pred_{backend}")
        infer_run(["--model-dir", out, "-o", pred, "--backend", backend, "--seed", "1", "--num", "3",
                   "--label", "2"])
        pictures.append(_pictures(pred, [f"sample_{i:03d}.png" for i in range(3)]))
    assert max(np.abs(a - b).max() for a, b in zip(*pictures)) <= 1


def test_tensorrt_and_reduced_precision_are_refused_before_the_model_is_built(tmp_path):
    cfg, ckpt, _ = gan_case(str(tmp_path), "pix2pix")
    from oars.export.onnx_export import export_task

    with pytest.raises(ExportError, match=r"^config: GAN generators export to --format onnx, openvino, .*litert, not "
                                          r"tensorrt \(no TensorRT engine of a generator has been built and checked\)"):
        export_task(cfg).exporter(cfg).check_export(cfg, fmt="tensorrt", precision="fp32")  # without the package too
    with pytest.raises(ExportError, match=r"^config: --half / --int8 are not supported for GAN generators yet"):
        export_model(cfg, ckpt, str(tmp_path / "half"), fmt="openvino", half=True)
    assert not (tmp_path / "half").exists()
