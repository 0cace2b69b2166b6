"""tools/export.py without the ``deploy`` extra (onnx, onnxscript, onnxruntime): one line naming the flag that needs
the package, the extra and the pip command (oars.extras, the runtime's mechanism with oars' table), before the
checkpoint is read or the model built; the library functions that import them say the same."""

from __future__ import annotations

import pytest
from demo_utils import DEMO_CFG, load_tool
from hidden_packages import hide_packages

from oars.cli import run_cli
from oars.extras import MissingExtraError

DEPLOY_INSTALL = "from the 'deploy' extra: pip install -e '.[deploy]'"


def _exit_code_and_stderr(argv: list[str], capsys) -> tuple[int, str]:
    main = load_tool("export").main
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run_cli(lambda: main(argv))
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("hidden, flags, feature", [
    ("onnx", [], "tools/export.py"),
    ("onnxscript", ["--no-check"], "tools/export.py"),
    ("onnxruntime", [], "tools/export.py's check against PyTorch (--no-check skips it)"),
    ("onnxruntime", ["--half"], "tools/export.py --half"),
    ("onnxruntime", ["--int8", "--calib-dir", "calib"], "tools/export.py --int8"),
])
def test_export_without_the_deploy_extra_is_one_line(hidden, flags, feature, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # relative -w/-o as a user types them; model.pth does not exist
    (tmp_path / "calib").mkdir()
    hide_packages(monkeypatch, hidden)
    code, err = _exit_code_and_stderr(["-c", DEMO_CFG, "-w", "model.pth", "-o", "out", *flags], capsys)
    assert (code, err) == (2, f"error: {feature} needs {hidden}, {DEPLOY_INSTALL}\n")
    assert not (tmp_path / "out").exists()


def test_export_with_the_extra_goes_on_to_its_own_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    hide_packages(monkeypatch, "onnxruntime")  # not needed without the check: the missing checkpoint is what is told
    code, err = _exit_code_and_stderr(["-c", DEMO_CFG, "-w", "model.pth", "-o", "out", "--no-check"], capsys)
    assert code == 2 and "model.pth" in err and "needs" not in err and "Traceback" not in err


def test_library_functions_name_the_extra(monkeypatch):
    """Deep inside oars.export (other tasks' exports call these directly): the same kind of message."""
    from oars.export.check import ort_session
    from oars.export.guards import max_opset
    from oars.export.precision import convert_fp16, quantize_int8

    hide_packages(monkeypatch, "onnx", "onnxruntime")
    for call, message in [(max_opset, "tools/export.py needs onnx"),
                          (lambda: ort_session("m.onnx"), "running the exported ONNX graph needs onnxruntime"),
                          (lambda: convert_fp16("m.onnx", "h.onnx"), "tools/export.py --half needs onnx"),
                          (lambda: quantize_int8("m.onnx", "q.onnx", [], "image"),
                           "tools/export.py --int8 needs onnxruntime")]:
        with pytest.raises(MissingExtraError) as err:
            call()
        assert str(err.value) == f"{message}, {DEPLOY_INSTALL}"
