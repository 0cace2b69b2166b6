"""Ctrl-C pressed again while the first one is handled: tools/train.py still ends with the first one's message
(the last good checkpoint and the command that continues from it) and status 130, not a KeyboardInterrupt
traceback from the middle of the handling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from demo_utils import DEMO_CFG, ROOT, demo_overrides

from oars import cli

# tools/train.py, run as its own ``__main__``, with two waits a test can time signals against: the loss of epoch 2's
# first batch (epoch_1.pth is saved) writes ``training`` and sleeps until Ctrl-C; the handling of that Ctrl-C (the
# search for the last good checkpoint) writes ``handling`` and polls until the test writes ``sent`` after a second
# SIGINT. Under Python's own handler that second SIGINT raises KeyboardInterrupt inside the poll.
DRIVER = """
import os, runpy, signal, sys, time

import oars  # first, as tools/*.py import it

# Python's own SIGINT handler, as a tool started from a terminal has it (a test run started in the background of
# a non-interactive shell inherits SIGINT ignored, and Python keeps it so)
signal.signal(signal.SIGINT, signal.default_int_handler)

import oars.engine.work_dir as work_dir
from segmentation.models.segmentors.encoder_decoder import EncoderDecoder

markers = os.environ["CTRL_C_MARKERS"]
real_loss, real_latest = EncoderDecoder.loss, work_dir.latest_checkpoint
calls = []


def mark(name):
    open(os.path.join(markers, name), "w").close()


def loss(self, inputs, data_samples):
    calls.append(1)
    if len(calls) == 5:  # 4 batches an epoch
        mark("training")
        time.sleep(120)
    return real_loss(self, inputs, data_samples)


def latest_checkpoint(folder):
    mark("handling")
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(markers, "sent")) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    return real_latest(folder)


EncoderDecoder.loss = loss
work_dir.latest_checkpoint = latest_checkpoint
sys.argv = ["tools/train.py", *sys.argv[1:]]
runpy.run_path("tools/train.py", run_name="__main__")
"""


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    """Until ``path`` exists; fails when the process ends first or the time is up."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the run ended (status {proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout} s"
        time.sleep(0.02)


def test_second_ctrl_c_while_the_first_is_handled_ends_quietly(demo_data, tmp_path):
    work, markers = tmp_path / "work", tmp_path / "markers"
    markers.mkdir()
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    env = dict(os.environ, OMP_NUM_THREADS="1", CTRL_C_MARKERS=str(markers))
    args = ["-c", DEMO_CFG, "--work-dir", str(work), "-o", *demo_overrides(demo_data, epochs=2)]
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, *args], cwd=ROOT, env=env, stdout=stdout,
                                stderr=stderr)
        try:
            _wait_for(markers / "training", proc)
            proc.send_signal(signal.SIGINT)
            _wait_for(markers / "handling", proc)
            proc.send_signal(signal.SIGINT)
            (markers / "sent").touch()
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stderr_text = err.read_text()
    assert code == 130, stderr_text[-3000:]
    assert "Traceback" not in stderr_text and "KeyboardInterrupt" not in stderr_text, stderr_text[-3000:]
    assert stderr_text.endswith(f"error: interrupted; the last good checkpoint is {work / 'epoch_1.pth'}; continue "
                                f"with --resume: python tools/train.py -c {DEMO_CFG} --work-dir {work} --resume -o "
                                f"{' '.join(demo_overrides(demo_data, epochs=2))}\n"), stderr_text[-3000:]


@pytest.fixture
def sigint_handler():
    """The test's SIGINT handler, put back afterwards (a handled Ctrl-C leaves SIGINT ignored: the tool is ending)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set from the main thread only")
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_run_cli_ignores_ctrl_c_after_the_first(sigint_handler, capsys):
    """The handler run_cli installs, called as Python calls it on SIGINT (no real signal in the test process)."""
    seen = []

    def main() -> None:
        handler = signal.getsignal(signal.SIGINT)
        assert handler is not signal.default_int_handler
        try:
            handler(signal.SIGINT, None)
        except KeyboardInterrupt:
            seen.append(signal.getsignal(signal.SIGINT))
            from oars.engine.run_errors import TrainingInterrupted

            raise TrainingInterrupted("interrupted; ...") from None

    with pytest.raises(SystemExit) as info:
        cli.run_cli(main)
    assert info.value.code == 130 and capsys.readouterr().err == "error: interrupted; ...\n"
    assert seen == [signal.SIG_IGN]  # from the first Ctrl-C on, while it is handled and the tool ends
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_run_cli_gives_back_the_handler_when_no_ctrl_c_came(sigint_handler):
    cli.run_cli(lambda: None)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # SIGINT ignored (a background job): left so
    cli.run_cli(lambda: None)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
