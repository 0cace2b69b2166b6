"""oars.models.exported.ExportedModel (tools/eval.py --model-dir) reaches the runtime only through the task contract:
the task builds the predictor, gives its inputs and fills the predictions; the defaults are the image predictor's.
Also the default INT8 calibration reader (images for [B, 3, H, W] graphs, none otherwise). No model, no export."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from mmengine.structures import BaseDataElement

from oars.errors import OarsError
from oars.export.precision import IMAGE_READER, CalibrationBatches, CalibrationReader
from oars.export.spec import ExportOptions
from oars.tasks import Exporter
from oars_deploy.errors import DeployError


class _Predictor:
    def __init__(self, task: str, fail: bool = False) -> None:
        self.deploy = {"model": {"task": task}}
        self.fail, self.seen = fail, []

    def predict(self, inputs: list[Any]) -> list[dict]:
        if self.fail:
            raise DeployError("clip.xyz: cannot decode")
        self.seen.append(list(inputs))
        return [{"value": len(str(x))} for x in inputs]


class _Exporter(Exporter):
    """An exporter role with the contract's defaults (no graph to build here)."""

    def build_export_spec(self, model, cfg, options):  # pragma: no cover - not exported here
        raise NotImplementedError


class _Task(_Exporter):
    scope = "toy"
    evaluates_exports = True

    def __init__(self, predictor: _Predictor) -> None:
        self.predictor, self.built, self.batch_inputs = predictor, None, []

    def export_predictor(self, model_dir: str, device: str, backend: str, model_cfg: dict | None = None) -> Any:
        self.built = (model_dir, device, backend, model_cfg)
        return self.predictor

    def export_inputs(self, samples: list[Any], inputs: Any = None) -> list[Any]:
        self.batch_inputs.append(inputs)
        return [s.metainfo["filename"] for s in samples]

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        sample.set_field(result["value"], "pred_value")


def _model(monkeypatch, predictor: _Predictor):
    import oars.tasks
    from oars.models.exported import ExportedModel

    task = _Task(predictor)
    # the task of the scope, whose only kind's exporter is ``task``
    monkeypatch.setattr(oars.tasks, "get_task", lambda scope: SimpleNamespace(exporter=lambda cfg: task))
    return ExportedModel("EXPORT", scope="toy", device="cpu", backend="onnxruntime",
                         model_cfg={"type": "ToyNet"}), task


def _samples(*names: str) -> list[BaseDataElement]:
    return [BaseDataElement(metainfo={"filename": n}) for n in names]


def test_exported_model_runs_the_tasks_predictor_on_the_tasks_inputs(monkeypatch):
    predictor = _Predictor("toy")
    model, task = _model(monkeypatch, predictor)
    assert task.built == ("EXPORT", "cpu", "onnxruntime", {"type": "ToyNet"})  # the config's model section too
    out = model.test_step({"inputs": ["x", "y"], "data_samples": _samples("a.mp4", "long_name.mp4")})
    assert task.batch_inputs == [["x", "y"]]  # the batch's packed inputs reach the task
    assert predictor.seen == [["a.mp4", "long_name.mp4"]]  # the task's inputs, in the batch's order
    assert [s.pred_value for s in out] == [5, 13]
    assert [s.pred_value for s in model.val_step((None, _samples("bb")))] == [2]
    with pytest.raises(OarsError, match="evaluated, not trained"):
        model(None)


def test_exported_model_refusals(monkeypatch):
    with pytest.raises(OarsError, match=r"--model-dir EXPORT: its deploy.yaml is a 'other' model, but the config "
                                        r"is a 'toy' one"):
        _model(monkeypatch, _Predictor("other"))
    model, _ = _model(monkeypatch, _Predictor("toy", fail=True))
    with pytest.raises(OarsError, match="--model-dir EXPORT: clip.xyz: cannot decode"):
        model.test_step({"data_samples": _samples("clip.xyz")})


def test_default_export_inputs_read_image_files(tmp_path):
    import cv2

    image = np.random.default_rng(0).integers(0, 255, (6, 5, 3), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "a.png"), image)
    hooks = _Exporter()
    got = hooks.export_inputs([BaseDataElement(metainfo={"img_path": str(tmp_path / "a.png")})])
    np.testing.assert_array_equal(got[0], image)
    with pytest.raises(OarsError, match="a test sample has no img_path"):
        hooks.export_inputs(_samples("a.mp4"))
    with pytest.raises(OarsError, match="--model-dir: .*missing.png"):
        hooks.export_inputs([BaseDataElement(metainfo={"img_path": str(tmp_path / "missing.png")})])


def test_default_calibration_reader_and_batches(tmp_path):
    """Images for an image graph, none for a clip graph; batches of any reader's units, the last filled up."""
    hooks = _Exporter()
    assert hooks.calibration_reader(None, ExportOptions(input_shape=(1, 3, 8, 8))) is IMAGE_READER
    assert hooks.calibration_reader(None, ExportOptions(input_shape=(1, 8, 3, 8, 8))) is None

    class Counting(CalibrationReader):
        what = "numbers"

        def items(self, files):
            return [(f, k) for f in files for k in range(2)]

        def load(self, items, deploy_cfg):
            return np.array([[float(f) * 10 + k] for f, k in items]) * deploy_cfg["scale"]

    batches = CalibrationBatches(["1", "2", "3"], {"scale": 2}, batch=4, reader=Counting())
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[0][:, 0], [20, 22, 40, 42])
    np.testing.assert_array_equal(batches[-1][:, 0], [60, 62, 62, 62])  # filled up with its last unit
    assert batches[1].dtype == np.float32 and batches[1].flags["C_CONTIGUOUS"]
    with pytest.raises(IndexError):
        batches[2]
