"""tools/eval.py takes the config and checkpoint as flags (-c/-w) or positionally (MMDetection's CONFIG CHECKPOINT);
given twice or not at all: one argparse message, exit status 2. The positional form evaluating for real is in
tests/test_tools.py (test_train_eval_infer)."""

from __future__ import annotations

import os
import runpy

import pytest
from demo_utils import ROOT

parse_args = runpy.run_path(os.path.join(ROOT, "tools", "eval.py"))["parse_args"]


@pytest.mark.parametrize("argv", [
    ["cfg.yaml", "w.pth"],
    ["cfg.yaml", "w.pth", "--report", "-o", "a=1"],
    ["-c", "cfg.yaml", "-w", "w.pth"],
    ["cfg.yaml", "-w", "w.pth"],
    ["--report", "cfg.yaml", "w.pth"],
])
def test_flags_and_positional_arguments_give_the_same_run(argv):
    args = parse_args(argv)
    assert (args.config, args.weights, args.model_dir) == ("cfg.yaml", "w.pth", None)


def test_positional_config_with_an_export_folder():
    args = parse_args(["cfg.yaml", "--model-dir", "export"])
    assert (args.config, args.weights, args.model_dir) == ("cfg.yaml", None, "export")


@pytest.mark.parametrize(("argv", "message"), [
    (["a.yaml", "w.pth", "-c", "b.yaml"], "the config is given twice: CONFIG a.yaml and -c b.yaml; give one"),
    (["a.yaml", "w.pth", "-w", "v.pth"], "the model is given twice: CHECKPOINT w.pth and -w v.pth; give one"),
    (["a.yaml", "w.pth", "--model-dir", "d"], "the model is given twice: CHECKPOINT w.pth and --model-dir d"),
    (["-c", "a.yaml", "w.pth"], "the config is given twice: CONFIG w.pth and -c a.yaml"),
    ([], "a config is required: tools/eval.py CONFIG CHECKPOINT, or -c CONFIG -w CHECKPOINT"),
    (["a.yaml"], "a checkpoint (or --model-dir) is required: tools/eval.py CONFIG CHECKPOINT"),
    (["a.yaml", "w.pth", "x"], "unrecognized arguments: x"),
])
def test_given_twice_or_missing_is_one_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and "Traceback" not in err
    assert err.count("error:") == 1
