"""Without the serve extra (Ray), ``oars-serve`` and ``oars-infer --ray`` stop with one line naming the extra and
exit status 2, before Ray would be imported and before any output is written; no traceback. The modules are
imported afresh with Ray hidden, so a Ray import at the top of one of them would fail these tests too."""

from __future__ import annotations

import importlib
import os

import pytest
from hidden_packages import hide_packages
from serve_cases import write_images, write_tiny_segmentor

SERVE_INSTALL = "pip install 'oars-deploy[serve]' (in an oars checkout: pip install -e '.[serve]')"


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's folder (the cwd): ``imgs/`` with one photo and a tiny export in ``export/``."""
    monkeypatch.chdir(tmp_path)
    write_images("imgs", [(16, 16)])
    write_tiny_segmentor("export")
    return tmp_path


def _exit(main, argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["--write-config", "serve.yaml"]], ids=["serve", "write-config"])
def test_oars_serve_without_ray_is_one_line(user, argv, monkeypatch, capsys):
    hide_packages(monkeypatch, "ray", reimport=("oars_deploy.serve",))
    cli = importlib.import_module("oars_deploy.serve.cli")
    code, err = _exit(cli.main, ["--model-dir", "export", *argv], capsys)
    assert (code, err) == (2, f"error: oars-serve needs ray, from the 'serve' extra: {SERVE_INSTALL}\n")
    assert not os.path.exists("serve.yaml")


def test_oars_serve_with_ray_goes_on_to_its_own_checks(user, capsys):
    from oars_deploy.serve.cli import main

    code, err = _exit(main, ["--model-dir", "no_export"], capsys)  # past the extra: the folder is what is wrong
    assert code == 2 and "no_export" in err and "needs ray" not in err and "Traceback" not in err


@pytest.mark.parametrize("hidden", ["ray", "pyarrow"])  # no Ray; Ray without its data extra
def test_oars_infer_ray_without_ray_is_one_line(user, hidden, monkeypatch, capsys):
    hide_packages(monkeypatch, hidden, reimport=("oars_deploy.serve", "oars_deploy.cli"))
    cli = importlib.import_module("oars_deploy.cli")
    code, err = _exit(cli.main, ["--model-dir", "export", "-i", "imgs", "-o", "out", "--ray"], capsys)
    assert (code, err) == (2, f"error: oars-infer --ray needs {hidden}, from the 'serve' extra: {SERVE_INSTALL}\n")
    assert not os.path.exists("out")


def test_oars_infer_without_ray_flag_needs_no_ray(user, monkeypatch, capsys):
    hide_packages(monkeypatch, "ray", reimport=("oars_deploy.serve", "oars_deploy.cli"))
    importlib.import_module("oars_deploy.cli").main(["--model-dir", "export", "-i", "imgs", "-o", "out"])
    assert os.path.isfile("out/results.jsonl")
