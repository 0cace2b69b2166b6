"""The runtime's ncnn and MNN backends (oars_deploy.backends_ncnn, oars_deploy.backends_mnn): model.ncnn.param/.bin
and model.mnn map named inputs to named outputs as ONNX Runtime on model.onnx does (ncnn one image at a time, the
batch stacked back), ``oars-infer --backend ncnn|mnn`` runs them without torch, and every way they cannot start is
one message (the file the export did not write, another device, a damaged file, a missing package with its pip
command). Tiny hand-built graphs converted by the export's writers: a second each, no torch export."""

from __future__ import annotations

import os.path as osp

import numpy as np
import pytest
from hidden_packages import hide_packages
from test_deploy_python_predictor import _images, run_infer_without_torch
from tiny_exports import tiny_segmentor_dir

from oars.export.formats import FormatJob
from oars.export.formats.mnn import MNN_FORMAT
from oars.export.formats.ncnn import NCNN
from oars_deploy.backends import BACKENDS, OrtBackend, make_backend
from oars_deploy.cli import run as infer_main
from oars_deploy.errors import DeployError
from oars_deploy.records import read_results

pytest.importorskip("ncnn", reason="the runtime's ncnn extra is not installed")
pytest.importorskip("pnnx", reason="the edge extra (pnnx, --format ncnn) is not installed")
pytest.importorskip("MNN", reason="the runtime's mnn extra is not installed")


@pytest.fixture()
def model_dir(tmp_path) -> str:
    """A batch-2 1x1-conv 'segmentor' with model.ncnn.param/.bin and model.mnn beside its model.onnx."""
    folder, _ = tiny_segmentor_dir(str(tmp_path / "m"), 2)
    src = osp.join(folder, "model.onnx")
    for writer in (NCNN, MNN_FORMAT):
        writer.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=folder))
    return folder


def test_ncnn_and_mnn_give_onnx_runtime_outputs(model_dir):
    x = np.random.default_rng(0).normal(size=(2, 3, 32, 32)).astype(np.float32)
    ref = OrtBackend(osp.join(model_dir, "model.onnx"))({"image": x})
    for name in ("ncnn", "mnn"):
        backend = make_backend(name, model_dir, {}, "cpu")
        assert backend.input_names == ["image"] and backend.output_names == ["logits"]  # the graph's own names
        got = backend({"image": x})
        assert list(got) == ["logits"] and got["logits"].dtype == np.float32
        assert got["logits"].shape == (2, 4, 32, 32)  # ncnn: two single-image runs stacked back into the batch
        np.testing.assert_allclose(got["logits"], ref["logits"], rtol=0, atol=1e-5)
        assert not np.allclose(got["logits"][0], got["logits"][1])  # each image its own result
        with pytest.raises(DeployError, match=r"the model has inputs \['image'\], not \['img'\]"):
            backend({"img": x})
    assert {"ncnn", "mnn"} <= set(BACKENDS)


def test_oars_infer_backends_give_the_same_records_without_torch(model_dir, tmp_path):
    images = _images(str(tmp_path / "images"), [40, 32])
    outs = {}
    for backend in ("onnxruntime", "ncnn", "mnn"):
        out = str(tmp_path / f"out_{backend}")
        proc = run_infer_without_torch("--model-dir", model_dir, "-i", images, "-o", out, "--backend", backend)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "The device supports" not in proc.stdout  # MNN's native banner is kept off the console
        outs[backend] = read_results(out)
    assert len(outs["onnxruntime"]) == 2
    assert outs["ncnn"] == outs["onnxruntime"] == outs["mnn"]


def test_backend_errors_are_one_message(model_dir, tmp_path, monkeypatch):
    bare, _ = tiny_segmentor_dir(str(tmp_path / "bare"), 1)  # model.onnx only
    images = _images(str(tmp_path / "images"), [32])
    for name, file in (("ncnn", "model.ncnn.param"), ("mnn", "model.mnn")):
        with pytest.raises(DeployError, match=rf"^--backend {name}: no {file} in {bare}; export the model with "
                                              rf"tools/export.py --format {name}$"):
            infer_main(["--model-dir", bare, "-i", images, "-o", str(tmp_path / "o"), "--backend", name])
        with pytest.raises(DeployError, match=rf"^--backend {name} runs on the CPU; use --device cpu, not 'cuda'$"):
            make_backend(name, model_dir, {}, "cuda")
    with open(osp.join(model_dir, "broken.ncnn.param"), "w") as f:
        f.write("7767517\n3 3\nInput")  # truncated
    with open(osp.join(model_dir, "broken.ncnn.bin"), "wb") as f:
        f.write(b"\0" * 8)
    with pytest.raises(DeployError, match=r"broken.ncnn.param \(or broken.ncnn.bin beside it\) is damaged or not an "
                                          r"ncnn model .*re-export it with tools/export.py --format ncnn$"):
        make_backend("ncnn", model_dir, {"ncnn": "broken.ncnn.param"}, "cpu")
    (tmp_path / "m" / "lone.ncnn.param").write_text((tmp_path / "m" / "model.ncnn.param").read_text())
    with pytest.raises(DeployError, match=r"^--backend ncnn: no ncnn model file .*lone.ncnn.bin; export one"):
        make_backend("ncnn", model_dir, {"ncnn": "lone.ncnn.param"}, "cpu")  # the .bin is missing
    with open(osp.join(model_dir, "broken.mnn"), "wb") as f:
        f.write(b"not an MNN model at all")
    with pytest.raises(DeployError, match=r"broken.mnn is damaged or not an MNN model.*re-export it with "
                                          r"tools/export.py --format mnn$"):
        make_backend("mnn", model_dir, {"mnn": "broken.mnn"}, "cpu")
    for module, name in (("ncnn", "ncnn"), ("MNN", "mnn")):
        with monkeypatch.context() as patch:
            hide_packages(patch, module)
            with pytest.raises(DeployError, match=rf"^--backend {name} needs {module}, from the '{name}' extra: pip "
                                                  rf"install 'oars-deploy\[{name}\]' \(in an oars checkout: pip "
                                                  r"install -e '\.\[edge\]'\)$"):
                make_backend(name, model_dir, {}, "cpu")


def test_oars_serve_takes_the_flag_and_its_model_runs_on_the_backend(model_dir, tmp_path):
    """oars-serve builds its model with the predictor's backend builder: ``--backend ncnn|mnn`` parses, and the
    served model predicts what it predicts on ONNX Runtime (Ray itself is not started)."""
    from oars_deploy.serve.cli import parse_args
    from oars_deploy.serve.models import load_served

    images = _images(str(tmp_path / "images"), [40])
    ref = load_served(model_dir, "cpu", "onnxruntime")
    image = ref.load_path(osp.join(images, "img0.png"))
    expected = ref.predict([image])[0]
    for name in ("ncnn", "mnn"):
        assert parse_args(["--model-dir", model_dir, "--backend", name]).backend == name
        served = load_served(model_dir, "cpu", name)
        got = served.predict([image])[0]
        assert served.record("img0.png", image, got) == ref.record("img0.png", image, expected)
    with pytest.raises(SystemExit):
        parse_args(["--model-dir", model_dir, "--backend", "paddle-lite"])
