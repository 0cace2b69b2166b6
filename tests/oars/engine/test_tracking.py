"""Experiment tracking (``--logger`` / ``loggers:``): MLflow's local store and W&B offline files from one short run
of the shrunk demo config, the resolved config's notes, the artifacts chosen, and the messages for bad choices."""

from __future__ import annotations

import glob
import importlib.util
import os
import sys

import pytest
import yaml
from demo_utils import DEMO_CFG, ROOT, demo_overrides
from mmengine.config import Config

from oars.config.resolved import RESOLVED_KEY
from oars.engine.tracking import load_logger_table, logger_names, resolve_loggers
from oars.errors import OarsError
from oars.visualization.tracking_backends import run_artifacts, run_checkpoint

pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("mlflow", "wandb")),
                                reason="needs the track extra: pip install -e .[track]")

_NO_NETWORK = "http://127.0.0.1:1"  # nothing listens there: any attempt to reach W&B would fail loudly


@pytest.fixture(scope="module")
def tracked_run(demo_data, tmp_path_factory):
    """One epoch (4 iterations) of the demo config tracked by MLflow, W&B (offline) and TensorBoard."""
    from oars.engine.entry import train

    root = tmp_path_factory.mktemp("tracked")
    work_dir = str(root / "work")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"WANDB_MODE": "offline", "WANDB_BASE_URL": _NO_NETWORK, "WANDB_SILENT": "true",
                           "WANDB_DISABLE_GIT": "true", "WANDB_ANONYMOUS": "never",
                           "WANDB_DATA_DIR": str(root / "wandb_data"), "WANDB_CACHE_DIR": str(root / "wandb_cache"),
                           "WANDB_CONFIG_DIR": str(root / "wandb_config"), "MLFLOW_ALLOW_FILE_STORE": "true",
                           "MLFLOW_TRACKING_URI": _NO_NETWORK}.items():
            mp.setenv(key, value)  # MLFLOW_TRACKING_URI: the backend must use its own store, not the environment
        mp.delenv("WANDB_API_KEY", raising=False)
        runner = train(DEMO_CFG, demo_overrides(demo_data, epochs=1), work_dir=work_dir,
                       loggers=["mlflow,wandb", "tensorboard"])
    return work_dir, runner.timestamp


def test_logger_names_accepts_repeats_and_comma_lists():
    assert logger_names(["MLflow, wandb", "tensorboard", "mlflow"]) == ("mlflow", "wandb", "tensorboard")
    assert logger_names(None) == () and logger_names("wandb") == ("wandb",)


def test_defaults_file_names_every_tracker():
    table = load_logger_table()
    assert set(table) == {"mlflow", "wandb", "tensorboard", "clearml"}
    assert table["mlflow"]["backend"]["store_dir"] == "{work_dir}/mlruns"
    assert table["wandb"]["backend"]["init_kwargs"]["mode"] == "offline"


def test_mlflow_store_holds_params_metrics_and_artifacts(tracked_run):
    import mlflow

    work_dir, stamp = tracked_run
    client = mlflow.MlflowClient(tracking_uri=f"file://{os.path.abspath(work_dir)}/mlruns")
    experiment = client.get_experiment_by_name("unet_demo_shapes")  # the config's name
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == stamp and run.info.status == "FINISHED"
    assert run.data.params["model.backbone.base_channels"] == "4"  # the resolved config, -o included
    losses = client.get_metric_history(run.info.run_id, "loss")
    assert [m.step for m in losses] == [1, 2, 3, 4] and all(m.value > 0 for m in losses)
    assert "mIoU" in run.data.metrics  # validation metrics too

    def walk(path=None):
        for item in client.list_artifacts(run.info.run_id, path):
            yield from walk(item.path) if item.is_dir else [item.path]

    artifacts = set(walk())
    assert {"config.yaml", f"logs/{stamp}.log"} <= artifacts
    best = [a for a in artifacts if a.startswith("checkpoints/")]
    assert best == [f"checkpoints/{os.path.basename(run_checkpoint(work_dir))}"]
    assert best[0].startswith("checkpoints/best_")
    assert not any("mlruns" in a or "wandb" in a for a in artifacts)  # the trackers' own files stay out


def test_wandb_writes_offline_files_under_the_work_dir(tracked_run):
    work_dir, stamp = tracked_run
    (run_dir,) = glob.glob(os.path.join(work_dir, "wandb", "offline-run-*"))
    (record_file,) = glob.glob(os.path.join(run_dir, "run-*.wandb"))
    data = open(record_file, "rb").read()
    assert stamp.encode() in data  # the run's name
    assert b"base_channels" in data  # the config
    assert b"run-files-" in data  # the artifact of the run's files
    logs = "".join(open(p, encoding="utf-8", errors="replace").read()
                   for p in glob.glob(os.path.join(work_dir, "wandb", "**", "*.log"), recursive=True))
    assert "127.0.0.1:1" not in logs and '"level":"ERROR"' not in logs  # nothing was sent anywhere


def test_tensorboard_events_and_config_notes(tracked_run):
    work_dir, stamp = tracked_run
    assert glob.glob(os.path.join(work_dir, stamp, "vis_data", "events.out.tfevents.*"))
    saved = yaml.safe_load(open(os.path.join(work_dir, "config.yaml"), encoding="utf-8"))
    types = [b["type"] for b in saved["visualizer"]["vis_backends"]]
    assert types == ["LocalVisBackend", "OarsMLflowVisBackend", "OarsWandbVisBackend", "TensorboardVisBackend"]
    assert saved["loggers"] == ["mlflow", "wandb", "tensorboard"]
    notes = saved[RESOLVED_KEY]
    assert notes["visualizer.vis_backends[1]"]["source"].startswith("--logger flag: mlflow")


def test_print_config_shows_backends_and_sources(demo_data, tmp_path, monkeypatch, capsys):
    """tools/train.py --logger (repeatable, comma lists) beside the config key, and a re-run adds nothing twice."""
    spec = importlib.util.spec_from_file_location("train_tool", os.path.join(ROOT, "tools", "train.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    args = ["-c", DEMO_CFG, "--work-dir", str(tmp_path / "w"), "--logger", "mlflow,wandb", "--logger", "mlflow",
            "--print-config", "-o", *demo_overrides(demo_data), "loggers=[tensorboard]"]
    monkeypatch.setattr(sys, "argv", ["train.py", *args])
    tool.main()
    text = capsys.readouterr().out
    shown = yaml.safe_load(text)
    backends = shown["visualizer"]["vis_backends"]
    assert [b["type"] for b in backends][1:] == ["TensorboardVisBackend", "OarsMLflowVisBackend",
                                                 "OarsWandbVisBackend"]
    assert backends[2]["store_dir"] == f"{tmp_path / 'w'}/mlruns" and backends[2]["exp_name"] == "unet_demo_shapes"
    notes = shown[RESOLVED_KEY]
    assert notes["visualizer.vis_backends[1]"]["source"].startswith("config (-o")
    assert notes["visualizer.vis_backends[2]"]["source"].startswith("--logger flag: mlflow")
    assert not (tmp_path / "w").exists()  # --print-config writes nothing

    again = tmp_path / "config.yaml"
    again.write_text(text)
    from oars.engine.entry import print_config

    shown_again = yaml.safe_load(print_config(str(again), work_dir=str(tmp_path / "w"), loggers=["wandb"]))
    assert shown_again["visualizer"]["vis_backends"] == backends


def _cfg(tmp_path, **keys) -> Config:
    return Config({"work_dir": str(tmp_path), **keys})


def test_unknown_tracker_and_bad_key_are_named(tmp_path):
    with pytest.raises(OarsError, match=r"--logger flag: unknown tracker 'neptun'; expected one of mlflow, wandb"):
        resolve_loggers(_cfg(tmp_path), ["neptun"])
    with pytest.raises(OarsError, match=r"loggers: expected a list of tracker names"):
        resolve_loggers(_cfg(tmp_path, loggers={"mlflow": True}))


@pytest.mark.parametrize("name,command", [("mlflow", r"pip install -e \.\[track\]"),
                                          ("wandb", r"pip install -e \.\[track\]"),
                                          ("clearml", "pip install clearml")])
def test_missing_package_names_the_pip_command(tmp_path, monkeypatch, name, command):
    monkeypatch.setitem(sys.modules, name, None)  # `import name` fails as if it were not installed
    cfg = _cfg(tmp_path, loggers=[name])
    with pytest.raises(OarsError, match=rf"loggers: {name} needs the Python package '{name}', which is not "
                                        rf"installed: {command}"):
        resolve_loggers(cfg)
    resolve_loggers(cfg, check_packages=False)  # --print-config still shows what the run would use
    assert cfg.visualizer["vis_backends"][-1]["type"] == load_logger_table()[name]["backend"]["type"]


def test_run_artifacts_bounded_pictures_report_and_checkpoint_choice(tmp_path):
    (tmp_path / "config.yaml").write_text("a: 1\n")
    (tmp_path / "report.html").write_text("<html></html>")
    for folder in ("pictures", "eval/pictures", "mlruns/pictures"):
        (tmp_path / folder).mkdir(parents=True)
        for i in range(3):
            (tmp_path / folder / f"{i}.png").write_bytes(b"png")
    (tmp_path / "epoch_2.pth").write_bytes(b"x")
    (tmp_path / "epoch_10.pth").write_bytes(b"x")
    found = run_artifacts(str(tmp_path), None, max_pictures=4)
    rel = [(os.path.relpath(p, tmp_path), folder) for p, folder in found]
    assert rel[:2] == [("config.yaml", ""), ("report.html", "")]
    pictures = [r for r in rel if r[0].endswith(".png")]
    assert len(pictures) == 4 and not any(r[0].startswith("mlruns") for r in pictures)
    assert ("eval/pictures/0.png", "eval/pictures") in pictures
    assert rel[-1] == ("epoch_10.pth", "checkpoints")  # no best_*.pth, no last_checkpoint: the highest number
    (tmp_path / "best_mIoU_epoch_2.pth").write_bytes(b"x")
    assert run_checkpoint(str(tmp_path)) == str(tmp_path / "best_mIoU_epoch_2.pth")


@pytest.mark.parametrize("env,mode", [(None, "offline"), ("online", None), ("disabled", None)])
def test_wandb_offline_unless_wandb_mode_says_otherwise(tmp_path, monkeypatch, env, mode):
    from oars.visualization.tracking_backends import OarsWandbVisBackend

    if env is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", env)
    default = load_logger_table()["wandb"]["backend"]
    backend = OarsWandbVisBackend(str(tmp_path / "20260101_000000" / "vis_data"), init_kwargs=default["init_kwargs"])
    assert backend._init_kwargs.get("mode") == mode  # an init argument would win over WANDB_MODE
    assert backend._init_kwargs["name"] == "20260101_000000"  # the run's timestamp


def test_mlflow_params_with_odd_key_characters(tmp_path, monkeypatch):
    import mlflow

    from oars.visualization.tracking_backends import OarsMLflowVisBackend

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    backend = OarsMLflowVisBackend(str(tmp_path / "20260101_000000" / "vis_data"), store_dir=str(tmp_path / "mlruns"),
                                   exp_name="odd")
    backend.add_config(Config({"work_dir": str(tmp_path), "weights": {"cat(1)": 2.0, "dog": 1.0}}))
    backend.close()
    client = mlflow.MlflowClient(tracking_uri=f"file://{tmp_path}/mlruns")
    (run,) = client.search_runs([client.get_experiment_by_name("odd").experiment_id])
    assert run.data.params == {"work_dir": str(tmp_path), "weights.cat_1_": "2.0", "weights.dog": "1.0"}
    assert run.info.run_name == "20260101_000000"
