"""The studio stops a run with Ctrl-C: a training job obeys SIGINT even when it inherited it ignored (a studio
started as ``oars-studio &`` in a script), where it would otherwise train to its end."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as inherited from a shell's background job
if sys.argv[1] == "obey":
    from oars.studio.train_job import obey_ctrl_c
    obey_ctrl_c()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
except KeyboardInterrupt:
    sys.exit(130)
sys.exit(0)
"""


@pytest.mark.parametrize("mode,code", [("obey", 130), ("inherit", 0)])
def test_a_job_obeys_ctrl_c_whatever_it_inherited(mode, code):
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr[-2000:]
