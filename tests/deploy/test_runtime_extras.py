"""The runtime's optional extras (oars_deploy.extras): one helper turns a missing package into one line naming the
feature, the package, the extra and the pip command, for the runtime's own users (PyAV for videos, TensorRT and CuPy
for --backend tensorrt) and, with another table, for oars (tests/test_tools_config_check_extras.py)."""

from __future__ import annotations

import sys

import pytest
from hidden_packages import hide_packages

from oars_deploy.errors import DeployError, UserError
from oars_deploy.extras import Extras, check_extra, is_installed, require_extra

VIDEO_INSTALL = "pip install 'oars-deploy[video]' (in an oars checkout: pip install -e .)"


class ToyError(UserError):
    """The error class of the toy table below (another distribution's)."""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Three importable toy packages: ``toymain`` imports ``toydep`` (same extra) and, when asked, ``toyother``
    (another extra); ``toybroken`` fails to import as a package missing a shared library does."""
    for name, body in {"toymain": "import toydep\nimport os\nif os.environ.get('TOY_OTHER'):\n    import toyother\n",
                       "toydep": "", "toyother": "",
                       "toybroken": "raise ImportError('libtoy.so: cannot open shared object file')\n"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("toymain", "toydep", "toyother", "toybroken"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    table = {"toymain": ("toy-main", "toy"), "toydep": ("toy-dep", "toy"), "toyother": ("toy-other", "other"),
             "toybroken": ("toy-broken", "toy")}
    return Extras(packages=table, install=lambda extra: f"pip install 'toys[{extra}]'", error=ToyError,
                  distribution="toys")


def test_require_imports_or_names_the_extra(toy, monkeypatch):
    assert toy.require("toymain", "toy mode").__name__ == "toymain"
    monkeypatch.delitem(sys.modules, "toymain")
    hide_packages(monkeypatch, "toymain")
    with pytest.raises(ToyError, match=r"^toy mode needs toymain, from the 'toy' extra: pip install 'toys\[toy\]'$"):
        toy.require("toymain.sub", "toy mode")  # a submodule: the package is what is missing
    with pytest.raises(DeployError, match="^toy mode needs toymain"):
        toy.require("toymain", "toy mode", error=DeployError)  # a caller's own error class


def test_a_dependency_of_the_same_extra_is_named_another_is_not_caught(toy, monkeypatch):
    hide_packages(monkeypatch, "toydep")
    with pytest.raises(ToyError, match=r"^toy mode needs toydep, from the 'toy' extra: pip install 'toys\[toy\]'$"):
        toy.require("toymain", "toy mode")
    monkeypatch.delitem(sys.modules, "toydep")  # back: now toymain's dependency of ANOTHER extra is missing
    monkeypatch.setenv("TOY_OTHER", "1")
    hide_packages(monkeypatch, "toyother")
    with pytest.raises(ImportError) as err:  # a broken install of another package: its own error, not ours
        toy.require("toymain", "toy mode")
    assert not isinstance(err.value, ToyError) and err.value.name == "toyother"


def test_missing_submodule_and_broken_install_are_told_apart(toy):
    with pytest.raises(ToyError, match=r"^toy mode needs toydep.nothing, which the installed toydep lacks; install "
                                       r"the version toys pins: pip install 'toys\[toy\]'$"):
        toy.require("toydep.nothing", "toy mode")
    with pytest.raises(ToyError, match=r"^toy mode needs toybroken, which is installed but does not import "
                                       r"\(libtoy.so: cannot open shared object file\); reinstall it"):
        toy.require("toybroken", "toy mode")


def test_check_names_the_extra_without_importing(toy, monkeypatch):
    toy.check(["toymain", "toyother"], "toy mode")
    assert "toymain" not in sys.modules and "toyother" not in sys.modules  # looked up, not imported
    hide_packages(monkeypatch, "toyother")
    with pytest.raises(ToyError, match=r"^toy mode needs toyother, from the 'other' extra: "):
        toy.check(["toymain", "toyother"], "toy mode")
    assert is_installed("toymain") and not is_installed("toyother") and not is_installed("no_such_toy")


def test_the_runtime_table_names_both_install_commands(monkeypatch):
    assert require_extra("av", "decoding videos").__name__ == "av"
    check_extra(["ray", "fastapi"], "oars-serve")
    hide_packages(monkeypatch, "av", "ray")
    with pytest.raises(DeployError) as err:
        require_extra("av", "decoding videos")
    assert str(err.value) == f"decoding videos needs av, from the 'video' extra: {VIDEO_INSTALL}"
    with pytest.raises(DeployError) as err:
        check_extra(["ray", "fastapi"], "oars-serve")
    assert str(err.value) == ("oars-serve needs ray, from the 'serve' extra: pip install 'oars-deploy[serve]' (in an "
                              "oars checkout: pip install -e '.[serve]')")


def test_video_readers_and_writer_name_the_video_extra(tmp_path, monkeypatch):
    """Without PyAV, each place that opens a video says so in one line (the clip reader with its caller's class)."""
    from oars_deploy.clips.decode import VideoFile
    from oars_deploy.streams import VideoWriter
    from oars_deploy.streams.source import FrameStream, stream_source

    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(64))  # not a still image: the decoder would decide
    hide_packages(monkeypatch, "av")
    with pytest.raises(DeployError) as err:
        FrameStream(stream_source(str(clip)))
    assert str(err.value) == f"reading video streams needs av, from the 'video' extra: {VIDEO_INSTALL}"
    with pytest.raises(DeployError) as err:
        VideoWriter(tmp_path / "out.mp4", 25)
    assert str(err.value) == f"writing videos needs av, from the 'video' extra: {VIDEO_INSTALL}"
    assert not (tmp_path / "out.mp4").exists()

    class TrainingReader(VideoFile):
        setup_error = ToyError

    with pytest.raises(ToyError) as err:
        TrainingReader(str(clip))
    assert str(err.value) == f"decoding videos needs av, from the 'video' extra: {VIDEO_INSTALL}"


def test_video_writer_runs_with_pyav(tmp_path):
    import numpy as np

    from oars_deploy.streams import VideoWriter

    with VideoWriter(tmp_path / "out.mp4", 25) as writer:
        writer.write(np.zeros((16, 16, 3), np.uint8))
    assert (tmp_path / "out.mp4").stat().st_size > 0


def test_tensorrt_backend_names_its_extras(monkeypatch):
    from oars_deploy.tensorrt import TensorRTRunner

    hide_packages(monkeypatch, "tensorrt", "cupy")
    with pytest.raises(DeployError) as err:
        TensorRTRunner("model.engine")
    assert str(err.value) == ("--backend tensorrt needs tensorrt, from the 'tensorrt' extra: pip install "
                              "'oars-deploy[tensorrt]' (in an oars checkout: pip install tensorrt cupy-cuda12x)")
