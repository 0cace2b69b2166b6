"""A concise console: tools/train.py prints what runs, where it writes, the progress and the metrics (mmengine's
environment, config and hook dumps go to the log file; -v prints them), and repeats warnings under "Notes"."""

from __future__ import annotations

import io
import logging

import pytest
from demo_utils import DEMO_CFG, demo_overrides
from demo_utils import run_tool as _tool

from oars.engine.runner import ConsoleFilter, console_is_verbose, verbose_console


def _before_progress(text: str) -> list[str]:
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "Epoch(train)" in line and "eta:" in line)
    return lines[:first]


def test_a_tiny_training_run_is_concise(demo_data, tmp_path):
    work = tmp_path / "work"
    out = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(work), "-o", *demo_overrides(demo_data))
    head = _before_progress(out.stdout + out.stderr)
    assert len(head) < 60, "\n".join(head)
    text = "\n".join(head)
    assert "Config:" not in text and "Hooks will be executed" not in text and "System environment" not in text
    assert f"training {DEMO_CFG}: EncoderDecoder (" in text and "train 16 samples, val 8 samples" in text
    assert f"writing to {work} (config.yaml" in text and "-v prints the set-up dump" in text
    assert "mIoU" in out.stdout  # the metrics still print
    assert (work / "config.yaml").is_file()  # the resolved config went to the work dir
    log = next(work.glob("*/*.log")).read_text()
    assert "Config:" in log and "Hooks will be executed" in log  # the full dump is in the log file


@pytest.mark.slow
def test_verbose_prints_the_config_and_hooks(demo_data, tmp_path):
    out = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path / "work"), "-v", "-o",
                *demo_overrides(demo_data))
    text = "\n".join(_before_progress(out.stdout + out.stderr))
    assert "Config:" in text and "Hooks will be executed in the following order" in text
    assert "-v prints the set-up dump" not in text


def _logger(console: ConsoleFilter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(console)
    logger = logging.getLogger(f"oars-console-test-{id(console)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, stream


def test_warnings_are_repeated_under_notes_and_dumps_dropped():
    console = ConsoleFilter(verbose=False)
    logger, stream = _logger(console)
    logger.warning("weights for backbone not found offline; training from scratch")
    logger.info("Config:\nmodel = dict(...)")
    logger.info("Epoch(train) [1][1/4]  eta: 0:00:01")
    logger.warning("weights for backbone not found offline; training from scratch")  # once in the notes
    logger.error("refused path ../outside")
    printed = stream.getvalue()
    assert "Config:" not in printed and "Epoch(train)" in printed
    notes = console.notes()
    assert notes.splitlines() == ["Notes (2 repeated from above):",
                                  "  - weights for backbone not found offline; training from scratch",
                                  "  - refused path ../outside"]
    logger.info(notes, extra={"oars_note": True})
    assert console.notes() == notes  # the repeat itself is not collected again
    assert ConsoleFilter(verbose=False).notes() is None  # a run without warnings prints no Notes heading


def test_verbose_keeps_the_dumps(monkeypatch):
    monkeypatch.delenv("OARS_VERBOSE", raising=False)
    assert not console_is_verbose()
    with verbose_console(True):
        assert console_is_verbose()
        console = ConsoleFilter(console_is_verbose())
    assert not console_is_verbose()
    logger, stream = _logger(console)
    logger.info("Config:\nmodel = dict(...)")
    assert "Config:" in stream.getvalue()
    monkeypatch.setenv("OARS_VERBOSE", "1")
    assert console_is_verbose()
