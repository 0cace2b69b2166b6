"""Every file oars writes for users goes through oars_deploy.atomic.atomic_write: normal permissions (not
mkstemp's 0600), no temporary file left, the previous file intact when the write fails."""

from __future__ import annotations

import os

import pytest

from oars_deploy.atomic import FileWriteError, remove_stale_temp_files


def _dump_config(path):
    from oars.config import dump_config

    dump_config({"model": {"type": "X"}}, path)


def _html_report(path):
    from oars.visualization.html_report import write_html_report

    write_html_report(path, "t", [])


def _coco_json(path):
    from detection.datasets.converters import write_coco_json

    write_coco_json({"images": []}, str(path))


def _checkpoint(path):
    from oars.engine.checkpoint import AtomicLocalBackend

    AtomicLocalBackend().put(b"x", path)


def _records(path):
    from oars_deploy.records import write_records

    write_records([], str(path))


WRITERS = {"config.yaml": _dump_config, "report.html": _html_report, "train.json": _coco_json,
           "epoch_1.pth": _checkpoint, "detections.json": _records}


@pytest.fixture()
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writer_is_atomic_with_normal_permissions(name, tmp_path, umask_022, monkeypatch):
    path = tmp_path / name
    WRITERS[name](path)
    assert path.stat().st_mode & 0o777 == 0o644
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(FileWriteError, match=f"cannot write .*{name}: the disk is full") as info:
        WRITERS[name](path)
    assert str(info.value).startswith("cannot write"), "the message alone, without OSError's [Errno N] prefix"
    assert path.read_bytes() == before and os.listdir(tmp_path) == [name]


def test_stale_temp_files_of_every_writer_are_found(tmp_path):
    from oars_deploy.atomic import temp_path

    stale = [temp_path(tmp_path / "model.onnx"), str(tmp_path / ".oars-tmp-epoch_3.pth.x1"),
             str(tmp_path / ".tmp_abc"), str(tmp_path / ".config.yaml.k2.tmp")]
    for p in stale:
        open(p, "w").close()
    (tmp_path / "epoch_2.pth").write_text("keep")
    assert sorted(remove_stale_temp_files(tmp_path)) == sorted(stale)
    assert os.listdir(tmp_path) == ["epoch_2.pth"]
