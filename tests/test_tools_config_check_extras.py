"""Every tool that builds from a config checks it first (a misspelt type is one message naming the key path and the
closest name, as tools/train.py says it, not mmengine's KeyError), and a missing optional extra is one line naming
the feature, the package and the pip command (oars.extras), not ModuleNotFoundError."""

from __future__ import annotations

import sys

import pytest
from demo_utils import DEMO_CFG, load_tool

from oars.cli import run_cli
from oars.extras import MissingExtraError, require_extra

TYPO_MESSAGE = "model.backbone.type: unknown model type 'UNett'. Did you mean: UNet?"


@pytest.fixture
def typo_config(tmp_path):
    """The demo U-Net config with its backbone's type misspelt (UNet -> UNett), in tmp_path."""
    text = open(DEMO_CFG, encoding="utf-8").read()
    assert "_base_: [../../_base_/" in text and "backbone: {base_channels: 16" in text
    text = text.replace("../../_base_/", f"{DEMO_CFG.rsplit('/configs/', 1)[0]}/configs/_base_/")
    text = text.replace("backbone: {base_channels: 16", "backbone: {type: UNett, base_channels: 16")
    path = tmp_path / "unet_typo.yaml"
    path.write_text(text)
    return str(path)


def _exit_code_and_stderr(main, argv, capsys) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run_cli(lambda: main(argv))
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("tool, extra_args", [
    ("get_flops", []),
    ("export", ["-w", "model.pth"]),
    ("infer", ["-w", "model.pth", "-i", "images"]),
    ("compress", ["-w", "model.pth", "--method", "prune", "--target-flops", "0.5"]),
])
def test_misspelt_type_is_named_by_every_tool(tool, extra_args, typo_config, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # relative -w/-i/-o as a user types them; none of them exists
    argv = ["-c", "unet_typo.yaml", *extra_args]
    argv += ["--work-dir", "out"] if tool == "compress" else (["-o", "out"] if tool != "get_flops" else [])
    code, err = _exit_code_and_stderr(load_tool(tool).main, argv, capsys)
    assert code == 2 and "Traceback" not in err and "KeyError" not in err
    assert err.strip() == f"error: unet_typo.yaml: {TYPO_MESSAGE} (registered: " + err.split("(registered: ")[1].strip()


def test_misspelt_teacher_config_is_named(typo_config, tmp_path, capsys):
    argv = ["-c", DEMO_CFG, "-w", "model.pth", "--method", "distill", "--teacher-config", typo_config,
            "--teacher-weights", "teacher.pth", "--work-dir", str(tmp_path / "c")]
    code, err = _exit_code_and_stderr(load_tool("compress").main, argv, capsys)
    assert code == 2 and "Traceback" not in err and f"error: {typo_config}: {TYPO_MESSAGE}" in err


def test_the_good_config_still_runs(capsys):
    load_tool("get_flops").main(["-c", DEMO_CFG, "--shape", "32", "--depth", "0"])
    assert "FLOPs: " in capsys.readouterr().out


@pytest.mark.parametrize("method, module, extra", [
    ("qat", "torchao", "compress"),
    ("prune", "torch_pruning", "compress"),
    ("ptq", "onnxruntime", "deploy"),
])
def test_missing_extra_is_one_line(method, module, extra, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError, as when not installed
    argv = ["-c", DEMO_CFG, "-w", "model.pth", "--method", method, "--work-dir", str(tmp_path / "c")]
    code, err = _exit_code_and_stderr(load_tool("compress").main, argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert err == (f"error: tools/compress.py --method {method} needs {module}, from the '{extra}' extra: "
                   f"pip install -e '.[{extra}]'\n")


def test_require_extra_imports_or_names_the_extra(monkeypatch):
    assert require_extra("torch_pruning", "pruning").__name__ == "torch_pruning"
    monkeypatch.setitem(sys.modules, "torchao", None)
    with pytest.raises(MissingExtraError, match=r"^QAT needs torchao, from the 'compress' extra: "
                                                r"pip install -e '\.\[compress\]'$"):
        require_extra("torchao.quantization.pt2e", "QAT")  # a submodule: the package is what is missing
    monkeypatch.delitem(sys.modules, "torchao")
    with pytest.raises(MissingExtraError, match="needs torch_pruning.no_such_part, which the installed "
                                                "torch_pruning lacks"):
        require_extra("torch_pruning.no_such_part", "pruning")


def test_library_imports_go_through_the_helper(monkeypatch):
    """Deep inside oars.compress, a missing torch_pruning is the same kind of message (not ModuleNotFoundError)."""
    from oars.compress.prune import torch_pruning

    monkeypatch.setitem(sys.modules, "torch_pruning", None)
    with pytest.raises(MissingExtraError, match=r"structured pruning \(tools/compress.py --method prune\) needs "
                                                "torch_pruning, from the 'compress' extra"):
        torch_pruning()
