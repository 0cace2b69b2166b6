"""The search benchmarks (benchmarks/tune_search.py, benchmarks/auto_prune.py): the share of epochs the pruner saves
and the best trial are computed from the study's records as the docs' tables say, every search space fits its
config, bad flags are one message each; the scripts' runs at a tiny size are in test_benchmarks_smoke.py."""

from __future__ import annotations

import argparse
import os

import pytest
import yaml

from benchmarks import auto_prune, tune_search
from benchmarks.common import ROOT


def search_record(states_steps_values):
    return {"trials": {"trials": [{"number": i, "state": s, "steps": n, "value": v, "params": {"lr": i}}
                                  for i, (s, n, v) in enumerate(states_steps_values)]}, "wall_s": 120.0,
            "best_yaml": "best.yaml"}


def test_summary_counts_the_epochs_run_and_the_best_completed_trial():
    args = argparse.Namespace(budget_epochs=8)
    baseline = {"best": 0.30, "wall_s": 60.0}
    # a pruned trial's value (its last report) is never the best, a failed (killed, retried) one is not counted
    search = search_record([("COMPLETE", 8, 0.40), ("PRUNED", 1, 0.90), ("PRUNED", 3, 0.35), ("COMPLETE", 8, 0.45),
                            ("FAIL", 2, None)])
    row = tune_search.summarise(tune_search.MODELS["unet"], args, baseline, search)
    assert (row["trials"], row["pruned"], row["epochs_run"], row["epochs_without_pruning"]) == (4, 2, 20, 32)
    assert row["saved"] == pytest.approx(1 - 20 / 32)
    assert row["best_trial"] == 0.45 and row["best_params"] == {"lr": 3} and row["shipped"] == 0.30
    line = tune_search.table([row]).splitlines()[2]
    assert line.startswith("| U-Net demo (mIoU) | 4 (2) | 8 | 0.3000 | 0.4500 | 20 / 32 | 38% | 1.0 / 2.0 min |")
    # nothing completed: no best, said so in the table
    row = tune_search.summarise(tune_search.MODELS["unet"], args, baseline, search_record([("PRUNED", 1, 0.9)]))
    assert row["best_trial"] is None and "| 0.3000 | - | 1 / 8 | 88% |" in tune_search.table([row])


@pytest.mark.parametrize("name", list(tune_search.MODELS))
def test_every_search_space_fits_its_config(name, tmp_path):
    """The keys exist (did-you-mean otherwise) and the cosine T_max the budget sets is the config's."""
    from oars.config import load_config
    from oars.pipelines.tune.space import SearchSpaceError, load_space

    case = tune_search.MODELS[name]
    cfg = load_config(os.path.join(ROOT, case.config))
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(case.space))
    load_space(space).check_keys(cfg)
    space.write_text(yaml.safe_dump({"optim_wrapper.optimiser.lr": case.space["optim_wrapper.optimizer.lr"]}))
    with pytest.raises(SearchSpaceError, match="did you mean 'optim_wrapper.optimizer'"):
        load_space(space).check_keys(cfg)
    index = int(case.cosine.split(".")[1])
    assert cfg.param_scheduler[index]["type"] == "CosineAnnealingLR" and "T_max" in cfg.param_scheduler[index]


def test_tune_search_flags_are_checked(capsys):
    with pytest.raises(SystemExit):
        tune_search.parse_args(["--models", "unet,nope"])
    assert "--models unet,nope: expected names from ['unet', 'yolov3']" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # never regenerates the shared data/demo_shapes at another size
        tune_search.parse_args(["--num-train", "8"])
    assert "give its folder with --data" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tune_search.parse_args(["--trials", "0"])
    assert "--trials 0 --budget-epochs 8: both must be at least 1" in capsys.readouterr().err
    args = tune_search.parse_args(["--data", "d", "--num-train", "8"])
    assert (args.names, args.trials, args.budget_epochs, args.pruner) == (["unet"], 20, 8, "halving")
    assert tune_search.data_overrides("d") == ["train_dataloader.dataset.data_root=d",
                                               "val_dataloader.dataset.data_root=d",
                                               "test_dataloader.dataset.data_root=d"]


def test_auto_prune_flags_are_checked(capsys):
    bad = {("--models", "unet,nope"): "--models unet,nope: expected names from ['tsm', 'unet', 'yolov3']",
           ("--searches", "sa,grid"): "--searches sa,grid: expected sa, optuna or both",
           ("--models", "unet,yolov3", "--checkpoint", "c.pth"): "give one model with it",
           ("--models", ""): "nothing to measure: give --models or --latency-target",
           ("--target-flops", "1.5"): "--target-flops 1.5 / --latency-target None: fractions in (0, 1)",
           ("--num-val", "4"): "give its folder with --data",
           ("--models", "yolov3", "--checkpoint", "y.pth", "--latency-target", "0.7"): "must be the U-Net demo's",
           ("--latency-threads", "-1"): "--latency-threads -1: a number of threads >= 0",
           ("--round-to", "0"): "--round-to 0: a channel multiple >= 1"}
    for argv, message in bad.items():
        with pytest.raises(SystemExit):
            auto_prune.parse_args(list(argv))
        assert message in capsys.readouterr().err
    args = auto_prune.parse_args(["--models", "", "--latency-target", "0.6"])
    assert args.names == [] and args.searches == ["sa", "optuna"] and args.latency_size == 256
    assert args.latency_threads == 1 and auto_prune.parse_args(["--latency-threads", "4"]).latency_threads == 4
    assert args.round_to is None and auto_prune.parse_args(["--round-to", "8"]).round_to == 8


def test_auto_prune_side_by_side_latency_uses_the_given_threads(monkeypatch):
    import oars.compress.measure as measure

    calls = []
    monkeypatch.setattr(measure, "ort_latency_ms", lambda path, runs, warmup, threads: calls.append(threads) or 2.0)
    assert auto_prune.side_by_side_ms({"a": "a.onnx", "b": "b.onnx"}, rounds=3, threads=4) == {"a": 2.0, "b": 2.0}
    assert calls == [4] * 6


def test_auto_prune_schedule_is_fitted_as_compress_fits_it():
    """The control and a shortened training get the fine-tune's schedule: the cosine over the new length."""
    assert "param_scheduler.1.T_max=4" in auto_prune.schedule(auto_prune.MODELS["unet"], 4)


def test_auto_prune_tables_print_every_row(capsys):
    rows = [{"model": "U-Net demo", "variant": "original", "params": 1000, "flops": 2e8, "flops_ratio": 1.0,
             "metric": "mIoU", "value": 0.8, "fine_tune_epochs": 0, "ort_ms": 4.0, "latency_ratio": 1.0},
            {"model": "U-Net demo", "variant": "auto-sa", "params": 500, "flops": 1e8, "flops_ratio": 0.5,
             "metric": "mIoU", "value": 0.79, "fine_tune_epochs": 2, "ort_ms": 3.0, "latency_ratio": 0.75,
             "scored": 7},
            {"model": "U-Net demo", "variant": "control", "params": 1000, "flops": 2e8, "flops_ratio": 1.0,
             "metric": "mIoU", "value": None, "fine_tune_epochs": 2}]
    latency = {"model": "U-Net", "original_ms": 100.0, "target_ms": 60.0, "search_best_ms": 50.0,
               "refined_ms": 58.0, "refine_scale": 0.75, "original_again_ms": 101.0, "best_again_ms": 61.2,
               "best_over_target": 1.02, "scored": 5,
               "proposed": 9}
    auto_prune.print_tables(rows, latency)
    out = capsys.readouterr().out
    assert "| U-Net demo | auto-sa | 500 | 0.1000 (0.500) | mIoU 0.7900 | 2 | 3.00 (0.750) | 7 |" in out
    assert "| U-Net demo | control | 1,000 | 0.2000 (1.000) | mIoU - | 2 | - | - |" in out
    assert "| U-Net | 100.0 | 60.0 | 50.0 | 58.0 (0.750) | 101.0 / 61.2 | 1.020 | 5 / 9 |" in out
