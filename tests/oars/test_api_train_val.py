"""``Model.train`` with ultralytics' keyword arguments (mapped to the config's keys: checked in the work dir's
resolved config.yaml), ``resume`` / ``exist_ok`` as the CLI's ``--resume`` / ``--overwrite`` (and a refusal that
names them), and ``Model.val`` returning a metrics object equal to ``tools/eval.py``'s numbers."""

from __future__ import annotations

import json
import os
import runpy
import sys

import pytest
import yaml
from demo_utils import DEMO_CFG, ROOT, demo_overrides

from oars.api.metrics import Metrics, metric_aliases, register_metric_aliases
from oars.errors import OarsError

DROPPED = ("train_cfg.max_epochs=", "train_dataloader.batch_size=", "train_dataloader.num_workers=",
           "val_dataloader.num_workers=", "test_dataloader.num_workers=")


@pytest.fixture(scope="module")
def trained(demo_data, tmp_path_factory):
    """The shrunk segmentation demo trained 1 epoch through ``Model.train`` with ultralytics' arguments."""
    from oars import Model

    work = tmp_path_factory.mktemp("api_train") / "run"
    opts = [o for o in demo_overrides(demo_data) if not o.startswith(DROPPED)]
    model = Model(DEMO_CFG, overrides=opts, work_dir=str(work))
    out = model.train(epochs=1, batch=2, lr0=0.004, workers=0, imgsz=48, amp=True)
    return model, out, str(work)


def test_train_kwargs_become_config_keys(trained):
    model, out, work = trained
    saved = yaml.safe_load(open(os.path.join(work, "config.yaml")))
    assert saved["train_cfg"]["max_epochs"] == 1 and saved["train_dataloader"]["batch_size"] == 2
    assert saved["val_dataloader"]["batch_size"] == 4  # batch is training's only
    assert saved["optim_wrapper"]["optimizer"]["lr"] == 0.004
    assert all(saved[f"{s}_dataloader"]["num_workers"] == 0 for s in ("train", "val", "test"))
    assert [s["scale"] for s in saved["test_dataloader"]["dataset"]["pipeline"] if "scale" in s] == [[48, 48]]
    assert [s["scale"] for s in saved["train_dataloader"]["dataset"]["pipeline"] if "scale" in s] == [[48, 48]]
    assert saved["optim_wrapper"]["type"] == "MixedPrecisionOptimWrapper"  # amp=True: tools/train.py --amp's path
    assert out["weights"] == model.weights and os.path.isfile(model.weights)


def test_train_again_names_the_api_arguments(trained):
    """A second run into the same work dir is refused naming ``resume=True`` / ``exist_ok=True``, not CLI flags;
    ``exist_ok=True`` starts afresh there (``--overwrite``)."""
    from oars import Model

    model, _, work = trained
    again = Model(DEMO_CFG, overrides=model.overrides, work_dir=work)
    with pytest.raises(OarsError, match=r"resume=True to continue.*exist_ok=True to delete") as err:
        again.train(epochs=1)
    assert "--resume" not in str(err.value) and "--overwrite" not in str(err.value)
    with pytest.raises(OarsError, match="give one of them"):
        again.train(resume=True, exist_ok=True)
    out = again.train(exist_ok=True)
    assert os.path.isfile(out["weights"])


@pytest.mark.parametrize("kwargs, message", [
    ({"epochs": 0}, r"epochs=0\): expected a whole number"),
    ({"batch": 1.5}, r"batch=1.5\): expected a whole number"),
    ({"lr0": -1}, r"lr0=-1\): expected a learning rate"),
    ({"workers": -2}, r"workers=-2\): expected 0"),
    ({"device": "tpu"}, r"device='tpu'\): expected 'cpu' or 'cuda'"),
])
def test_bad_train_arguments_named(kwargs, message, tmp_path):
    from oars import Model

    with pytest.raises(OarsError, match=message):
        Model(DEMO_CFG, work_dir=str(tmp_path / "w")).train(**kwargs)


def test_val_metrics_equal_tools_eval(trained, tmp_path):
    model, _, _ = trained
    metrics = model.val()
    assert isinstance(metrics, Metrics) and metrics.mIoU == metrics["mIoU"] == metrics.to_dict()["mIoU"]
    assert metrics.seg.miou == metrics["mIoU"] and metrics.seg.macc == metrics["mAcc"]  # the task's aliases
    with open(metrics["metrics_file"]) as f:
        written = json.load(f)["metrics"]
    eval_dir = tmp_path / "cli"
    argv = sys.argv
    sys.argv = ["eval.py", "-c", DEMO_CFG, "-w", model.weights, "--work-dir", str(eval_dir), "-o", *model.overrides]
    try:
        runpy.run_path(os.path.join(ROOT, "tools", "eval.py"), run_name="__main__")
    finally:
        sys.argv = argv
    with open(eval_dir / "metrics.json") as f:
        cli = json.load(f)["metrics"]
    assert metrics.to_dict() == written == cli
    assert "mIoU" in repr(metrics) and repr(metrics).splitlines()[0].split() == ["metric", "value"]
    with pytest.raises(AttributeError, match="no metric mIOU; there are: .*mIoU"):
        _ = metrics.mIOU


def test_metrics_tree_and_aliases(monkeypatch):
    """Flat keys become attribute groups by their ``/`` parts; tasks register friendly aliases once."""
    from oars.api import metrics as metrics_module

    monkeypatch.setattr(metrics_module, "_ALIASES", {})  # this test's registrations end with it
    flat = {"coco/bbox_mAP": 0.5, "coco/bbox_mAP_50": 0.7, "coco/bbox_mAP_75": 0.4, "mIoU": 0.3}
    register_metric_aliases({"box.map": "coco/bbox_mAP", "box.map50": "coco/bbox_mAP_50"})
    register_metric_aliases({"box.map": "coco/bbox_mAP"})  # the same again: fine
    with pytest.raises(ValueError, match="box.map.*registered already"):
        register_metric_aliases({"box.map": "other/key"})
    m = Metrics(flat)
    assert m.coco.bbox_mAP_50 == 0.7 and m["coco/bbox_mAP_75"] == 0.4 and m.mIoU == 0.3
    assert m.box.map == 0.5 and m.box.map50 == 0.7 and m["box.map50"] == 0.7
    assert m.coco.to_dict() == {"bbox_mAP": 0.5, "bbox_mAP_50": 0.7, "bbox_mAP_75": 0.4}
    assert m.to_dict() == flat and list(m) == list(flat) and "box.map" in metric_aliases()
    with pytest.raises(AttributeError, match="no metric coco.segm_mAP; there are: bbox_mAP"):
        _ = m.coco.segm_mAP
    with pytest.raises(KeyError, match="no metric 'nope'"):
        _ = m["nope"]
    assert not hasattr(Metrics({"mIoU": 0.1}), "box")  # an alias whose key the run lacks is absent
