"""Hyper-parameter search (oars.pipelines.tune, tools/tune.py): the space file's checks, the trial report hook and
Optuna's pruner, a tiny search through the tool (best.yaml trains), a killed study resumed, and every error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml
from demo_utils import DEMO_CFG, ROOT, demo_overrides, run_tool

from oars.pipelines.tune.space import SearchSpaceError, load_space, overrides_for
from oars.pipelines.tune.trial_hook import MetricNotReportedError, TrialReportHook, metric_value

optuna = pytest.importorskip("optuna")

SPACE = {"optim_wrapper.optimizer.lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True},
         "optim_wrapper.optimizer.weight_decay": {"type": "float", "low": 0.0, "high": 1.0e-3}}


def _space(tmp_path, data: dict, name: str = "space.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("spec, words", [
    ({"a.b": {"type": "float", "low": 1, "high": 1}}, ["empty"]),
    ({"a.b": {"type": "float", "low": 2, "high": 1}}, ["inverted"]),
    ({"a.b": {"type": "float", "low": 0, "high": 1, "log": True}}, ["log: true needs low > 0"]),
    ({"a.b": {"type": "flaot", "low": 0, "high": 1}}, ["did you mean 'float'"]),
    ({"a.b": {"type": "choice", "values": []}}, ["non-empty list"]),
    ({"a.b": {"type": "int", "low": 0.5, "high": 3}}, ["whole numbers"]),
    ({"a.b": {"type": "int", "low": 0, "high": 3, "lo": 1}}, ["'lo'", "not accepted"]),
    ({"a.b": 0.1}, ["needs a mapping"]),
])
def test_space_file_errors_name_the_key(tmp_path, spec, words):
    path = _space(tmp_path, spec)
    with pytest.raises(SearchSpaceError) as err:
        load_space(path)
    assert path in str(err.value) and "a.b" in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_space_key_missing_from_the_config_gets_did_you_mean(tmp_path):
    space = load_space(_space(tmp_path, {"optim_wrapper.optimiser.lr": SPACE["optim_wrapper.optimizer.lr"],
                                         "train_pipeline.9.prob": {"type": "float", "low": 0, "high": 1}}))
    cfg = {"optim_wrapper": {"optimizer": {"lr": 0.1}}, "train_pipeline": [{"type": "A"}]}
    with pytest.raises(SearchSpaceError, match=r"optim_wrapper\.optimiser does not exist.*'optim_wrapper\.optimizer'"):
        space.check_keys(cfg)
    good = load_space(_space(tmp_path, {"optim_wrapper.optimizer.lr": SPACE["optim_wrapper.optimizer.lr"],
                                        "train_pipeline.0.type": {"type": "choice", "values": ["A", "B"]}}, "ok.yaml"))
    good.check_keys(cfg)  # a list index is a key too


def test_overrides_keep_value_types():
    assert overrides_for({"a.b": 0.5, "c": [256, 256], "d": "x"}) == ["a.b=0.5", "c=[256, 256]", 'd="x"']


def test_list_choices_travel_through_optuna_as_json(tmp_path):
    from oars.pipelines.tune.study import decoded_params, suggest

    space = load_space(_space(tmp_path, {"scale": {"type": "choice", "values": [[256, 256], [320, 320]]},
                                         "n": {"type": "int", "low": 1, "high": 9, "step": 2}}))
    values = suggest(optuna.trial.FixedTrial({"scale": "[320, 320]", "n": 5}), space)
    assert values == {"scale": [320, 320], "n": 5}
    assert decoded_params(space, {"scale": "[256, 256]", "n": 3}) == {"scale": [256, 256], "n": 3}


def test_metric_value_exact_suffix_and_missing():
    assert metric_value({"mIoU": 0.5}, "mIoU", "c.yaml") == 0.5
    assert metric_value({"coco/bbox_mAP": 0.25, "coco/bbox_mAP_50": 0.5}, "bbox_mAP", "c.yaml") == 0.25
    with pytest.raises(MetricNotReportedError, match=r"'mIOU' \(did you mean 'mIoU'\?\).*c\.yaml reports aAcc, mIoU"):
        metric_value({"mIoU": 0.5, "aAcc": 0.9}, "mIOU", "c.yaml")


def test_report_hook_drives_the_pruner():
    """The hook's reports reach Optuna and a trial behind the others is pruned at its first rung."""
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2))
    planted = [[0.9, 0.9, 0.9], [0.1, 0.2, 0.3], [0.95, 0.96, 0.97]]

    def objective(trial):
        def report(value, step):
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()

        hook = TrialReportHook("mIoU", report, "c.yaml")
        for epoch, value in enumerate(planted[trial.number], 1):
            runner = SimpleNamespace(epoch=epoch, iter=epoch * 10, train_loop=SimpleNamespace(max_epochs=3))
            hook.after_val_epoch(runner, {"mIoU": value})
        return hook.last

    study.optimize(objective, n_trials=3)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "PRUNED", "COMPLETE"]
    assert list(study.trials[1].intermediate_values) == [1]  # stopped at the first validation


def _tune(tmp_path, demo_data, *extra, space=None, check=True, epochs=2):
    space = space or _space(tmp_path, SPACE)
    return run_tool("tune.py", "-c", os.path.relpath(DEMO_CFG, tmp_path), "--space", space,
                    "--budget-epochs", str(epochs), "--work-dir", "study", *extra,
                    "-o", *demo_overrides(demo_data, epochs), check=check, cwd=str(tmp_path))


@pytest.mark.slow  # trains through the tool in subprocesses (~45-110 s on two busy cores)
def test_tiny_search_writes_best_yaml_that_trains(tmp_path, demo_data):
    proc = _tune(tmp_path, demo_data, "--trials", "3")
    study = tmp_path / "study"
    trials = json.loads((study / "trials.json").read_text())
    assert [t["state"] for t in trials["trials"]].count("COMPLETE") >= 1
    assert {t["state"] for t in trials["trials"]} <= {"COMPLETE", "PRUNED"} and len(trials["trials"]) == 3
    assert len({json.dumps(t["params"], sort_keys=True) for t in trials["trials"]}) == 3
    for t in trials["trials"]:
        assert os.path.isdir(t["work_dir"]) and t["steps"] >= 1
    assert "best: trial" in proc.stdout and (study / "report.html").is_file()
    best = yaml.safe_load((study / "best.yaml").read_text())
    chosen = trials["trials"][trials["best"]]["params"]
    assert best["optim_wrapper"]["optimizer"]["lr"] == pytest.approx(chosen["optim_wrapper.optimizer.lr"])
    run_tool("train.py", "-c", "study/best.yaml", "--work-dir", "again", cwd=str(tmp_path))
    assert (tmp_path / "again" / "epoch_2.pth").is_file()
    # the same command again: the study already holds 3 finished trials, nothing more runs
    _tune(tmp_path, demo_data, "--trials", "3")
    assert len(json.loads((study / "trials.json").read_text())["trials"]) == 3


@pytest.mark.slow  # trains through the tool in subprocesses (~45-110 s on two busy cores)
def test_errors_are_one_line(tmp_path, demo_data):
    bad_metric = _tune(tmp_path, demo_data, "--trials", "1", "--metric", "mIOU", check=False, epochs=1)
    assert bad_metric.returncode == 2 and "Traceback" not in bad_metric.stderr
    assert "did you mean 'mIoU'" in bad_metric.stderr
    missing = _tune(tmp_path, demo_data, "--trials", "1", space=_space(tmp_path, {
        "optim_wrapper.optimizer.lrr": SPACE["optim_wrapper.optimizer.lr"]}, "typo.yaml"), check=False)
    assert missing.returncode == 2 and "'optim_wrapper.optimizer.lr'" in missing.stderr
    zero = _tune(tmp_path, demo_data, "--trials", "0", check=False)
    assert zero.returncode == 2 and "--trials 0" in zero.stderr
    rung = _tune(tmp_path, demo_data, "--trials", "1", "--budget-epochs", "2", "--min-epochs", "3", check=False)
    assert rung.returncode == 2 and "--min-epochs 3: the pruner's first rung must be between 1 and the budget" in \
        rung.stderr


@pytest.mark.slow  # trains through the tool in subprocesses (~45-110 s on two busy cores)
def test_storage_of_another_search_is_refused(tmp_path, demo_data):
    _tune(tmp_path, demo_data, "--trials", "1", epochs=1)
    other = _space(tmp_path, {"optim_wrapper.optimizer.lr": {"type": "float", "low": 0.2, "high": 0.3}}, "other.yaml")
    proc = _tune(tmp_path, demo_data, "--trials", "2", space=other, check=False, epochs=1)
    assert proc.returncode == 2 and "belongs to another search" in proc.stderr and "space differs" in proc.stderr


@pytest.mark.slow
def test_a_new_study_never_resumes_another_studys_trial(tmp_path, demo_data):
    """The storage deleted, the trial folders kept: the new study's trial 0 would land on the old trial's
    checkpoints; it is refused, naming the folder, and the old checkpoint is still there."""
    _tune(tmp_path, demo_data, "--trials", "1", epochs=1)
    (tmp_path / "study" / "study.db").unlink()
    proc = _tune(tmp_path, demo_data, "--trials", "1", check=False, epochs=1)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "trial_000 holds checkpoints of a trial this study did not run" in proc.stderr
    assert (tmp_path / "study" / "trial_000" / "epoch_1.pth").is_file()


@pytest.mark.slow
def test_killed_study_resumes_the_interrupted_trial(tmp_path, demo_data):
    """SIGKILL while trial 1 trains: the re-run marks it failed, runs its values again in its work dir from its
    last checkpoint, and ends with the asked number of finished trials; no values are tried twice."""
    space = _space(tmp_path, SPACE)
    cmd = [sys.executable, os.path.join(ROOT, "tools", "tune.py"), "-c", DEMO_CFG, "--space", space, "--trials", "3",
           "--budget-epochs", "4", "--work-dir", "study", "--pruner", "none", "-o",
           *demo_overrides(demo_data, 4)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    target = tmp_path / "study" / "trial_001" / "epoch_2.pth"
    deadline = time.time() + 300
    while not target.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert target.exists(), "trial 1 never reached epoch 2"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "trial 1 did not finish" in resumed.stdout
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study' / 'study.db'}")
    trials = optuna.load_study(study_name="unet_demo_shapes", storage=storage).trials
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") == 3 and states[1] == "FAIL"
    retry = next(t for t in trials if t.user_attrs.get("retry_of") == 1)
    assert retry.params == trials[1].params and retry.user_attrs["work_dir"] == trials[1].user_attrs["work_dir"]
    assert min(retry.intermediate_values) > 1  # resumed after the checkpoint, not trained from epoch 1
    finished = [json.dumps(t.params, sort_keys=True) for t in trials if t.state.name == "COMPLETE"]
    assert len(set(finished)) == 3


@pytest.mark.slow
def test_search_on_ray_tune(tmp_path, demo_data):
    """The same search on Ray Tune (a local Ray on the loopback, Optuna's sampler + ASHA), then restored."""
    pytest.importorskip("ray.tune")
    proc = _tune(tmp_path, demo_data, "--trials", "2", "--ray", epochs=1)
    trials = json.loads((tmp_path / "study" / "trials.json").read_text())
    assert trials["engine"] == "Ray Tune" and len(trials["trials"]) == 2
    assert all(t["state"] in ("COMPLETE", "PRUNED") and t["value"] is not None for t in trials["trials"])
    assert (tmp_path / "study" / "best.yaml").is_file(), proc.stdout[-2000:]
    again = _tune(tmp_path, demo_data, "--trials", "2", "--ray", epochs=1)
    assert "continuing the Ray Tune search" in again.stdout


def test_model_tune_is_the_tool(tmp_path, demo_data, monkeypatch):
    """oars.Model.tune runs the same search as tools/tune.py (one trial; the summary files)."""
    from oars import Model

    monkeypatch.chdir(tmp_path)
    model = Model(DEMO_CFG, overrides=demo_overrides(demo_data, 1))
    summary = model.tune(_space(tmp_path, SPACE), 1, budget_epochs=1, work_dir="api_study")
    assert summary["best"] is not None and os.path.isfile(summary["best_yaml"])
    assert json.loads((tmp_path / "api_study" / "trials.json").read_text())["engine"] == "Optuna"
