"""--format litert (oars.export.formats.litert): model.tflite converted by onnx2tf in its own virtual environment
(oars.export.formats.isolated_env: created once under the cache folder, a half-made one rebuilt, one build at a
time), parity-checked against ONNX Runtime FP32, run by ``oars-infer --backend litert``
(oars_deploy.backends_litert: NCHW inputs mapped to the model's NHWC) with the records ONNX Runtime gives; the main
environment's packages are the same before and after."""

from __future__ import annotations

import copy
import dataclasses
import os
import os.path as osp
import re
import subprocess
import sys
import threading
import time

import pytest
from format_cases import export_cli, image_graph, infer_records, nms_onnx, unknown_operator_onnx, write_images
from hidden_packages import hide_packages

from oars.config import apply_overrides
from oars.export.errors import ExportError
from oars.export.formats import FORMATS, FormatJob
from oars.export.formats import litert as litert_module
from oars.export.formats.isolated_env import MARKER, IsolatedEnv
from oars.export.formats.litert import CONVERTER_ENV, LITERT
from oars.pipelines.export import export_model
from oars_deploy.backends import make_backend
from oars_deploy.backends_litert import LAYOUT_FILE, LiteRTBackend, layout_permutation
from oars_deploy.deploy_config import read_deploy_yaml
from oars_deploy.errors import DeployError

LINE = re.compile(r"^litert (FP32|FP16) vs ONNX Runtime: max abs diff (\S+) \(agreement (\d\.\d{3})\)$", re.M)


def _pip_freeze() -> list[str]:
    return subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True,
                          check=True).stdout.splitlines()


@pytest.fixture(scope="session")
def litert_env() -> dict:
    """The converter's venv, built once per session where it is missing (in $OARS_CACHE or ~/.cache/oars, so later
    sessions reuse it), and the main environment's ``pip freeze`` from before."""
    pytest.importorskip("ai_edge_litert", reason="the runtime's litert extra (pip install ai-edge-litert) is missing")
    before = _pip_freeze()
    CONVERTER_ENV.ensure()
    return {"freeze_before": before, "python": CONVERTER_ENV.python}


# ----------------------------------------------------------------------------------------------------------------
# the isolated environment (fast: a venv without pip, or a pip that fails without the index)

def test_half_made_env_is_rebuilt_and_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("OARS_CACHE", str(tmp_path / "cache"))
    env = IsolatedEnv(name="probe", requirements=(), feature="--format probe")
    assert env.path.startswith(str(tmp_path / "cache" / "venvs" / "probe-"))
    os.makedirs(env.path)
    (tmp_path / "cache" / "venvs" / osp.basename(env.path) / "leftover.txt").write_text("half-made")
    assert not env.ready()  # no marker: never used as it is
    python = env.ensure()
    assert not osp.exists(osp.join(env.path, "leftover.txt")) and osp.isfile(osp.join(env.path, MARKER))
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True).stdout
    assert osp.realpath(prefix.strip()) == osp.realpath(env.path)
    stamp = os.stat(osp.join(env.path, MARKER)).st_mtime_ns
    assert env.ensure() == python and os.stat(osp.join(env.path, MARKER)).st_mtime_ns == stamp  # reused
    other = IsolatedEnv(name="probe", requirements=("pkg==2",), feature="--format probe")
    assert other.path != env.path  # new pins, new folder


def test_failed_pip_install_is_one_message_and_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("OARS_CACHE", str(tmp_path))
    env = IsolatedEnv(name="broken", requirements=("--no-index", "oars-test-absent==1.0"), feature="--format probe")
    with pytest.raises(ExportError) as err:
        env.ensure()
    text = str(err.value)
    assert text.startswith(f"--format probe: building its converter environment {env.path} failed (pip install exit "
                           "1): ERROR: ") and "oars-test-absent" in text and "\n" not in text, text
    assert not osp.exists(env.path)


def test_two_builds_at_once_build_once(tmp_path, monkeypatch):
    monkeypatch.setenv("OARS_CACHE", str(tmp_path))
    env = IsolatedEnv(name="locked", requirements=(), feature="--format probe")
    builds = []

    def slow_build(self) -> None:
        builds.append(threading.get_ident())
        time.sleep(0.3)  # the other thread arrives while this one builds
        os.makedirs(osp.join(self.path, "bin"))
        for name in ("bin/python", MARKER):
            open(osp.join(self.path, name), "w").close()

    monkeypatch.setattr(IsolatedEnv, "_build", slow_build)
    threads = [threading.Thread(target=env.ensure) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and env.ready()


def test_python_without_wheels_and_int8_are_refused_before_any_work(demo_case, tmp_path, monkeypatch):
    cfg, ckpt = demo_case
    LITERT.require("fp32")  # this interpreter (3.11) is one TensorFlow 2.19 has wheels for
    monkeypatch.setattr(litert_module, "CONVERTER_ENV", dataclasses.replace(CONVERTER_ENV, python_versions=((3, 99),)))
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    with pytest.raises(ExportError, match=rf"^--format litert: its converter environment pins onnx2tf==1\.29\.24, "
                                          rf"tensorflow==2\.19\.0, whose wheels exist for Python 3\.99 only; this is "
                                          rf"Python {re.escape(here)} "):
        export_model(cfg, ckpt, str(tmp_path / "out"), fmt="litert")
    with pytest.raises(ExportError, match=r"^--format litert --int8 is not supported \(onnx2tf's integer "
                                          r"quantisation is not wired in\); use --format litert --half"):
        export_model(cfg, ckpt, str(tmp_path / "out"), fmt="litert", int8=True, calib_dir=str(tmp_path))
    assert not osp.exists(tmp_path / "out") and "litert" in FORMATS


def test_missing_runtime_package_is_one_line(demo_case, tmp_path, monkeypatch):
    cfg, ckpt = demo_case
    hide_packages(monkeypatch, "ai_edge_litert")
    with pytest.raises(DeployError, match=r"^--backend litert needs ai_edge_litert, from the 'litert' extra: "
                                          r"pip install 'oars-deploy\[litert\]'$"):
        LiteRTBackend(str(tmp_path / "model.tflite"))
    with pytest.raises(ExportError, match=r"^--format litert needs ai_edge_litert, .*pip install"):
        export_model(cfg, ckpt, str(tmp_path / "out"), fmt="litert")


# ----------------------------------------------------------------------------------------------------------------
# the backend's own checks (no model conversion)

def test_graph_with_nms_refused_before_converting_naming_the_raw_mode(tmp_path, monkeypatch):
    """A decode + NMS graph is refused before onnx2tf runs (no tested detector's converted NMS graph agreed with ONNX
    Runtime), naming the operator, the formats that hold it and export.postprocess=raw; a graph without NMS goes on
    to the converter."""
    calls = []
    def run(self, args, **kwargs):  # the converter, which a refused graph never reaches
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, "", "boom")

    monkeypatch.setattr(IsolatedEnv, "run", run)
    src = nms_onnx(str(tmp_path / "model.onnx"))
    with pytest.raises(ExportError) as err:
        LITERT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path)))
    assert str(err.value).startswith(
        "--format litert cannot hold operator(s) NonMaxSuppression of this graph (onnx2tf converts them, but the "
        "converted decode + NMS graphs of the tested detectors disagree with ONNX Runtime or fail to convert); export "
        "it with --format onnx (ONNX Runtime), ort, openvino or mnn, which hold them; or export the graph without "
        "NonMaxSuppression, if the model's export can leave them to the runtime (e.g. export.postprocess=raw")
    assert calls == [] and sorted(os.listdir(tmp_path)) == ["model.onnx"]
    from onnx import helper

    relu = image_graph(str(tmp_path / "relu.onnx"), [helper.make_node("Relu", ["image"], ["out"])], [])
    with pytest.raises(ExportError, match="onnx2tf failed on relu.onnx"):
        LITERT.write(FormatJob(onnx_path=relu, fp32_onnx_path=relu, out_dir=str(tmp_path / "r")))
    assert len(calls) == 1


def test_ambiguous_output_layout_is_decided_by_the_values():
    """An output whose shape is the same channels first and last ([1, 4, 4, 4]: FCOS's reg_1 at 64 px) cannot be
    placed by its shape; the export keeps the permutation under which the LiteRT output equals ONNX Runtime's."""
    import numpy as np

    reference = np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4)
    channels_last = reference.transpose(0, 2, 3, 1)
    perms = [[0, 1, 2, 3], [0, 3, 1, 2]]
    assert litert_module.pick_permutation(perms, channels_last, reference) == [0, 3, 1, 2]
    assert litert_module.pick_permutation(perms, reference, reference) == [0, 1, 2, 3]
    assert layout_permutation([1, 4, 4, 4], [1, 4, 4, 4]) == [0, 1, 2, 3]  # why shapes alone cannot tell


def test_layout_permutation_maps_channels_first_and_back():
    assert layout_permutation((1, 3, 64, 48), (1, 64, 48, 3)) == [0, 2, 3, 1]  # NCHW image -> NHWC model
    assert layout_permutation((1, 3, 4, 32, 32), (1, 4, 32, 32, 3)) == [0, 2, 3, 4, 1]  # NCTHW clip -> NTHWC
    assert layout_permutation((1, 64, 48, 5), (1, 5, 64, 48)) == [0, 3, 1, 2]  # NHWC output -> ONNX NCHW
    assert layout_permutation((2, 3, 8, 8), (-1, 8, 8, 3)) == [0, 2, 3, 1]  # a dynamic batch matches any
    assert layout_permutation((1, 16), (1, 16)) == [0, 1]
    assert layout_permutation((1, 3, 64, 48), (1, 3, 48, 64)) is None  # no layout of it
    assert layout_permutation((1, 3), (1, 3, 1)) is None


def test_backend_refuses_missing_damaged_and_bad_layout_files(tmp_path):
    pytest.importorskip("ai_edge_litert", reason="the runtime's litert extra is missing")
    with pytest.raises(DeployError, match=r"^--backend litert: no model.tflite in .*; export the model with "
                                          r"tools/export.py --format litert$"):
        make_backend("litert", str(tmp_path), {"litert": "model.tflite"}, "cpu")
    (tmp_path / "model.tflite").write_bytes(b"not a flatbuffer" * 8)
    with pytest.raises(DeployError, match=r"^--backend litert: model file .*model.tflite is damaged or not a "
                                          r"LiteRT model \(ValueError: .*\); re-export it with tools/export.py "
                                          r"--format litert$"):
        make_backend("litert", str(tmp_path), {"litert": "model.tflite"}, "cpu")
    with pytest.raises(DeployError, match=r"^--backend litert runs on the CPU; use --device cpu, not 'cuda'$"):
        LiteRTBackend(str(tmp_path / "model.tflite"), device="cuda")


# ----------------------------------------------------------------------------------------------------------------
# the real converter (slow: the venv is built once per machine, ~1 min from pip's cache, minutes without it)

@pytest.mark.slow
def test_cli_unet_parity_infer_records_and_main_env_unchanged(litert_env, demo_case, tmp_path, monkeypatch, capsys):
    cfg, ckpt = demo_case
    out = export_cli(monkeypatch, cfg, ckpt, str(tmp_path), "--format", "litert")
    text = capsys.readouterr().out
    match = LINE.search(text)
    assert match and match.group(1) == "FP32" and match.group(3) == "1.000", text
    print(match.group(0))
    assert sorted(os.listdir(out)) == ["deploy.yaml", LAYOUT_FILE, "model.onnx", "model.tflite"]
    deploy = read_deploy_yaml(osp.join(out, "deploy.yaml"))
    assert {k: deploy["model"][k] for k in ("format", "backend", "litert", "onnx")} == {
        "format": "litert", "backend": "litert", "litert": "model.tflite", "onnx": "model.onnx"}
    assert deploy["parity"]["line"] == match.group(0) and deploy["parity"]["agreement"] == {"label": 1.0}
    write_images(str(tmp_path / "images"), count=3, seed=7)
    lite_records = infer_records("out", "images", "pred_litert", "litert")
    ort_records = infer_records("out", "images", "pred_ort", "onnxruntime")
    assert len(lite_records) == 3 and lite_records == ort_records  # agreement 1.0: the same label maps
    assert _pip_freeze() == litert_env["freeze_before"]  # no TensorFlow, NumPy 1.26 ... in the main environment
    assert "tensorflow" not in " ".join(litert_env["freeze_before"]).lower()


@pytest.mark.slow
def test_fp16_logits_put_back_into_the_onnx_layout(litert_env, demo_case, tmp_path):
    cfg, ckpt = copy.deepcopy(demo_case[0]), demo_case[1]
    apply_overrides(cfg, ["export.output_op=none"])
    result = export_model(cfg, ckpt, str(tmp_path), fmt="litert", half=True)
    parity = result["format"]["parity"]
    assert parity["precision"] == "fp16" and 0.99 <= parity["agreement"]["logits"] < 1.0  # FP16 weights: close
    assert (tmp_path / LAYOUT_FILE).read_text() == '{"outputs": {"logits": [0, 3, 1, 2]}}\n'  # NHWC -> NCHW
    assert (tmp_path / "model.tflite").stat().st_size < 0.6 * (tmp_path / "model.onnx").stat().st_size


@pytest.mark.slow
def test_unknown_operator_refused_naming_it(litert_env, tmp_path):
    src = unknown_operator_onnx(str(tmp_path / "model.onnx"))
    before = open(src, "rb").read()
    with pytest.raises(ExportError) as err:
        LITERT.write(FormatJob(onnx_path=src, fp32_onnx_path=src, out_dir=str(tmp_path)))
    assert str(err.value) == ("--format litert cannot hold operator(s) com.example:FancyOp of this graph (onnx2tf has "
                              "no TensorFlow conversion for it); export it with --format onnx (ONNX Runtime), which "
                              "runs every operator of the exported graph")
    assert open(src, "rb").read() == before  # onnx2tf rewrites its input: it gets a copy, the export is untouched
