"""The task contract end to end (issue 20, DESIGN.md §9): a small extra task defined inside the test suite
(``tests/extra_task``, scope ``oddtask``) trains, evaluates, exports and predicts through the tools, with no file
outside ``tests/`` edited.

The task is found as a REAL ``oars.tasks`` entry point: a minimal ``oddtask_plugin-0.0.dist-info`` folder
(``METADATA`` + ``entry_points.txt``) in a temporary folder on the subprocesses' ``PYTHONPATH``, which
``importlib.metadata`` reads like an installed distribution. Every step is a subprocess of ``tools/*.py``.

The export's runtime plug-in (``predictor: oddtask_classes``) is found by ``oars-infer`` through the same
distribution's ``oars.predictors`` entry point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from demo_utils import ROOT

CONFIG = os.path.join(ROOT, "tests", "extra_task", "configs", "oddtask_demo_shapes.yaml")
CLASSES = ["circle", "square", "triangle"]
PLUGIN = "oddtask_classes"
PREDICTOR_GROUP = "oars.predictors"  # where the runtime finds an installed task's predictor plug-in


def _write_dist_info(folder: str) -> str:
    """A minimal installed-distribution record of the extra task: its ``oars.tasks`` entry point and its predictor
    plug-in under :data:`PREDICTOR_GROUP`."""
    info = os.path.join(folder, "oddtask_plugin-0.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: oddtask-plugin\nVersion: 0.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write(f"[oars.tasks]\noddtask = extra_task.task:TASK\n\n[{PREDICTOR_GROUP}]\n"
                f"{PLUGIN} = extra_task.predictor:OddTaskClasses\n")
    return folder


def _env(site: str) -> dict:
    paths = [site, os.path.join(ROOT, "tests"), ROOT, os.path.join(ROOT, "deploy", "python")]
    old = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths + ([old] if old else [])),
                OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))


def _run(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    if check:
        assert proc.returncode == 0, f"{args[:2]}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _tool(env: dict, name: str, *args: str) -> subprocess.CompletedProcess:
    return _run(env, os.path.join(ROOT, "tools", name), *args)


def _records(folder) -> dict[str, dict]:
    with open(os.path.join(folder, "results.jsonl")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return {os.path.basename(r["input"]): r for r in lines}


@pytest.fixture(scope="module")
def oddtask(demo_data, tmp_path_factory) -> dict:
    """Train (2 epochs), evaluate, export and predict (tools/infer.py) the extra task once; the folders."""
    tmp = tmp_path_factory.mktemp("oddtask")
    env = _env(_write_dist_info(str(tmp / "site")))
    opts = [f"{split}.dataset.data_root={demo_data}" for split in ("train_dataloader", "val_dataloader",
                                                                     "test_dataloader")]
    work, export, infer = tmp / "work", tmp / "export", tmp / "infer"
    train = _tool(env, "train.py", "-c", CONFIG, "--work-dir", str(work), "-o", *opts)
    ckpt = (work / "last_checkpoint").read_text().strip()
    evaluated = _tool(env, "eval.py", "-c", CONFIG, "-w", ckpt, "--work-dir", str(work / "eval"), "-o", *opts)
    exported = _tool(env, "export.py", "-c", CONFIG, "-w", ckpt, "-o", str(export), *opts)
    images = os.path.join(demo_data, "images", "val")
    inferred = _tool(env, "infer.py", "-c", CONFIG, "-w", ckpt, "-i", images, "-o", str(infer), *opts)
    return {"env": env, "tmp": tmp, "work": work, "ckpt": ckpt, "export": export, "infer": infer, "images": images,
            "logs": {"train": train, "eval": evaluated, "export": exported, "infer": inferred}}


def test_extra_task_trains_evaluates_exports_and_predicts(oddtask):
    logs = oddtask["logs"]
    # train: the task's own registries, dataset, model and metric ran under the core's runner
    assert "loss_cls" in logs["train"].stdout + logs["train"].stderr
    assert os.path.isfile(oddtask["ckpt"])

    # eval: the task's metric on the 8 validation images
    metrics = json.loads((oddtask["work"] / "eval" / "metrics.json").read_text())["metrics"]
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["num_images"] == 8.0
    assert "accuracy" in logs["eval"].stdout

    # export: one image in, scores out; deploy.yaml names the task's runtime plug-in
    assert "self-check passed" in logs["export"].stdout
    deploy = yaml.safe_load((oddtask["export"] / "deploy.yaml").read_text())
    assert deploy["predictor"] == PLUGIN and deploy["model"]["task"] == "oddtask"
    assert deploy["labels"] == CLASSES and deploy["input"]["shape"] == [1, 3, 64, 64]
    assert [o["name"] for o in deploy["outputs"]] == ["scores"] and deploy["outputs"][0]["shape"] == [1, 3]
    assert (oddtask["export"] / "model.onnx").is_file()

    # tools/infer.py: a picture and a record per image
    trained = _records(oddtask["infer"])
    assert len(trained) == 8 and len(list(oddtask["infer"].glob("*_vis.png"))) == 8
    for record in trained.values():
        assert record["predictor"] == PLUGIN and record["class"] in CLASSES
        assert record["class"] == CLASSES[record["label"]]
        assert abs(sum(record["scores"].values()) - 1.0) < 1e-3

    # predict from the export: deploy/python/infer.py (oars-infer) finds the plug-in through the oars.predictors
    # entry point of the task's distribution, as it would for an installed package
    out = oddtask["tmp"] / "predict"
    _run(oddtask["env"], os.path.join(ROOT, "deploy", "python", "infer.py"), "--model-dir", str(oddtask["export"]),
         "-i", oddtask["images"], "-o", str(out))
    deployed = _records(out)
    assert set(deployed) == set(trained) and len(list(out.glob("*_vis.png"))) == 8
    for name, record in deployed.items():
        assert record["predictor"] == PLUGIN
        # the same numbers as the PyTorch model: ONNX Runtime on deploy.yaml's preprocessing
        got = np.array([record["scores"][c] for c in CLASSES])
        want = np.array([trained[name]["scores"][c] for c in CLASSES])
        assert np.abs(got - want).max() < 1e-3, (name, got, want)
        if np.sort(want)[-1] - np.sort(want)[-2] > 1e-3:
            assert record["label"] == trained[name]["label"], name
