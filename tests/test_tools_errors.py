"""What the tools say when a run fails: setup errors are config errors naming the key, errors while a loop
runs keep their type and say where, Ctrl-C names the checkpoint to resume from, an unwritable work dir is
one message, and relative paths land where users expect them."""

from __future__ import annotations

import errno
import os
import sys

import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, demo_overrides, det_demo_overrides
from demo_utils import run_tool as _tool

from oars.cli import run_cli
from oars.engine.entry import evaluate, train
from oars.engine.run_errors import WHERE_ATTR, TrainingInterrupted
from oars.errors import OarsError
from oars_deploy.atomic import FileWriteError


@pytest.fixture(scope="module")
def trained(demo_data, tmp_path_factory):
    """One epoch of the shrunk demo (4 iterations): a work dir with ``epoch_1.pth``."""
    work = tmp_path_factory.mktemp("seg_work")
    train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(work))
    return work, (work / "last_checkpoint").read_text().strip()


def _exit_code_and_stderr(fn, capsys) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run_cli(fn)
    return info.value.code, capsys.readouterr().err


def test_bad_batch_size_is_one_message_not_two_tracebacks(demo_data, tmp_path):
    proc = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path), "-o", *demo_overrides(demo_data),
                 "train_dataloader.batch_size=0", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("error: -o: train_dataloader.batch_size: expected a positive integer (1, 2, ...), "
                                   "got 0")


def test_error_in_the_first_iteration_keeps_its_type_and_says_where(demo_data, tmp_path, monkeypatch, capsys):
    """Not "the run could not be set up": the run was set up; the model failed on a batch."""
    from segmentation.models.segmentors.encoder_decoder import EncoderDecoder

    def broken_loss(self, inputs, data_samples):
        raise ValueError("label 7 is out of range")

    monkeypatch.setattr(EncoderDecoder, "loss", broken_loss)
    with pytest.raises(ValueError, match="label 7 is out of range") as info:
        train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(tmp_path / "work"))
    err = info.value
    assert not isinstance(err, OarsError)
    assert getattr(err, WHERE_ATTR) == "during training, epoch 1 of 1, batch 1 (iteration 1)"
    assert "oars: this happened during training, epoch 1 of 1, batch 1 (iteration 1)" in err.__notes__

    def rerun():
        raise err

    code, stderr = _exit_code_and_stderr(rerun, capsys)
    assert code == 1
    assert stderr.startswith("error: during training, epoch 1 of 1, batch 1 (iteration 1): ValueError: "
                             "label 7 is out of range\n")
    assert "OARS_DEBUG=1 shows the traceback" in stderr


def test_metric_error_during_evaluation_is_not_a_config_error(trained, demo_data, tmp_path, monkeypatch):
    from segmentation.evaluation.iou_metric import IoUMetric

    work, ckpt = trained

    def broken_process(self, data_batch, data_samples):
        raise KeyError("pred_sem_seg")

    monkeypatch.setattr(IoUMetric, "process", broken_process)
    with pytest.raises(KeyError) as info:
        evaluate(DEMO_CFG, ckpt, demo_overrides(demo_data), work_dir=str(tmp_path / "eval"))
    assert not isinstance(info.value, OarsError)
    assert getattr(info.value, WHERE_ATTR) == "during evaluation, batch 1"


def test_ctrl_c_during_a_checkpoint_save_names_the_last_good_checkpoint(demo_data, tmp_path, monkeypatch, capsys):
    """mmengine formats the config for each checkpoint under a bare ``except:`` that made Ctrl-C a SyntaxError."""
    import yapf.yapflib.yapf_api as yapf_api

    real_format = yapf_api.FormatCode
    saves = []

    def format_code(*args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "save_checkpoint":
            frame = frame.f_back
        if frame is not None:
            saves.append(1)
            if len(saves) == 2:  # Ctrl-C while the second checkpoint is saved
                raise KeyboardInterrupt
        return real_format(*args, **kwargs)

    monkeypatch.setattr(yapf_api, "FormatCode", format_code)
    work = tmp_path / "work"
    opts = demo_overrides(demo_data, epochs=2)
    with pytest.raises(TrainingInterrupted) as info:
        train(DEMO_CFG, opts, work_dir=str(work))
    message = str(info.value)
    first = str(work / "epoch_1.pth")
    assert message.startswith(f"interrupted; the last good checkpoint is {first}; continue with --resume: "
                              f"python tools/train.py -c {DEMO_CFG} --work-dir {work} --resume -o ")
    assert not (work / "epoch_2.pth").exists()

    def rerun():
        raise info.value

    code, stderr = _exit_code_and_stderr(rerun, capsys)
    assert code == 130 and stderr.startswith("error: interrupted; the last good checkpoint is ")

    monkeypatch.setattr(yapf_api, "FormatCode", real_format)  # the printed command continues the run
    runner = train(DEMO_CFG, opts, work_dir=str(work), resume=True)
    assert runner.epoch == 2 and (work / "epoch_2.pth").exists()


def test_ctrl_c_before_any_checkpoint_says_there_is_nothing_to_resume(demo_data, tmp_path, monkeypatch):
    from segmentation.models.segmentors.encoder_decoder import EncoderDecoder

    def interrupted(self, inputs, data_samples):
        raise KeyboardInterrupt

    monkeypatch.setattr(EncoderDecoder, "loss", interrupted)
    with pytest.raises(TrainingInterrupted, match="interrupted before the first checkpoint was saved in "):
        train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(tmp_path / "work"))


def test_work_dir_that_cannot_be_created_is_one_message(demo_data, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    work = blocker / "work"
    with pytest.raises(FileWriteError) as info:
        train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(work))
    assert f"work_dir {work}: cannot create this folder: not a directory; choose another --work-dir" in str(info.value)


@pytest.mark.parametrize("code, expected", [(errno.ENOSPC, "the disk is full"), (errno.EACCES, "permission denied")])
def test_work_dir_that_cannot_be_written_is_one_message(demo_data, tmp_path, monkeypatch, code, expected):
    """Read-only folders cannot be made as root (tests run as root here), so the write itself fails."""
    import oars_deploy.atomic

    def failing_mkstemp(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(oars_deploy.atomic.tempfile, "mkstemp", failing_mkstemp)
    work = tmp_path / "work"
    with pytest.raises(FileWriteError) as info:
        train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(work))
    assert f"work_dir {work}: cannot write there: " in str(info.value) and expected in str(info.value)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_work_dir_is_one_message(demo_data, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o500)
    try:
        with pytest.raises(FileWriteError, match=f"work_dir {work}: cannot write there"):
            train(DEMO_CFG, demo_overrides(demo_data), work_dir=str(work))
    finally:
        work.chmod(0o700)


@pytest.mark.slow
def test_relative_paths_land_where_users_expect(demo_data, tmp_path, monkeypatch):
    """As ``make demo-det`` calls the tools: relative -c, --work-dir and --show-dir from the current folder."""
    monkeypatch.chdir(tmp_path)
    config = os.path.relpath(DET_DEMO_CFG, tmp_path)
    opts = det_demo_overrides(demo_data, epochs=1)
    train(config, opts, work_dir="work_dirs/demo_det")
    work = tmp_path / "work_dirs" / "demo_det"
    ckpt = (work / "last_checkpoint").read_text().strip()
    assert os.path.isfile(ckpt) and (work / "config.yaml").is_file()
    result = evaluate(config, ckpt, opts, work_dir="work_dirs/demo_det", show_dir="work_dirs/demo_det/pictures",
                      max_show=2, report=True)
    assert result["report_file"] == "work_dirs/demo_det/report.html" and (work / "report.html").is_file()
    assert result["metrics_file"] == "work_dirs/demo_det/metrics.json" and (work / "metrics.json").is_file()
    assert (work / "pictures" / "summary.png").is_file()
    assert not (work / "work_dirs").exists()  # the relative work dir is not joined twice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work_dirs"]  # nothing written elsewhere
