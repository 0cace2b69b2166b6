"""QAT (oars.compress.qat): fake-quant fine-tuning of the shrunk U-Net demo through the runner, then its INT8
export: the Q/DQ graph runs in ONNX Runtime with quantised kernels, and agrees with the FP32 reference."""

from __future__ import annotations

import contextlib
import io
import os
import os.path as osp

import onnx
import pytest
import torch
from demo_utils import DEMO_CFG, ROOT, demo_overrides

from oars.errors import OarsError


@pytest.fixture(scope="module")
def qat_run(demo_data, tmp_path_factory):
    """A float checkpoint of the shrunk demo (untrained weights: QAT's mechanics, not its accuracy) and one QAT run
    of 2 iterations from it, exported."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config
    from oars.pipelines.compress.qat import run_qat
    from oars.tasks import activate

    cfg = load_config(DEMO_CFG, demo_overrides(demo_data))
    activate(cfg.default_scope)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    tmp = tmp_path_factory.mktemp("qat")
    float_ckpt = str(tmp / "float.pth")
    torch.save({"state_dict": model.state_dict(), "meta": {}}, float_ckpt)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        record = run_qat(cfg, float_ckpt, tmp / "qat", {"iters": 2, "val": True})
    record["printed"] = printed.getvalue()
    return cfg, float_ckpt, record


def test_qat_export_runs_int8_in_onnx_runtime(qat_run):
    _, _, record = qat_run
    assert "INT8 (QAT) vs FP32 graph: agreement label" in record["printed"], record["printed"]
    assert record["variant"] == "qat" and osp.isfile(record["checkpoint"]) and osp.isfile(record["config"])
    row = record["row"]
    assert row["variant"] == "qat" and row["method"] == "qat" and row["latency_int8_ms"] > 0 and row["size_mb"] > 0
    # the metric is the INT8 export's, run by the runtime predictor (the fake-quantised model's kept beside it)
    assert row["metric"] == "mIoU" and row["metric_of"] == "int8 export" and record["metrics_fake_quant"]["mIoU"] >= 0
    assert osp.isfile(osp.join(osp.dirname(record["checkpoint"]), "export_eval", "metrics.json"))
    assert record["captured"], "no sub-module was captured"
    nodes = [n.op_type for n in onnx.load(record["onnx_int8"]).graph.node]
    assert nodes.count("QuantizeLinear") >= 3 and nodes.count("DequantizeLinear") >= 3
    assert "BatchNormalization" not in nodes  # folded: Q -> Conv -> Q, which ONNX Runtime fuses
    assert record["int8_ops"].get("QLinearConv", 0) >= 3, record["int8_ops"]
    assert all(v is None or v >= record["min_agreement"] for v in record["agreement"].values())
    from oars_deploy.deploy_config import read_deploy_yaml

    deploy = read_deploy_yaml(record["export"])
    assert deploy["model"]["onnx"] == "model_int8.onnx" and deploy["model"]["precision"] == "int8"
    assert deploy["model"]["onnx_fp32"] == "model.onnx" and deploy["predictor"] == "semantic_labels"


def test_qat_export_predicts_with_the_runtime(qat_run, demo_data, tmp_path):
    import cv2

    from oars_deploy.predictor import Predictor

    _, _, record = qat_run
    predictor = Predictor(osp.dirname(record["export"]))  # deploy.yaml names model_int8.onnx
    folder = osp.join(demo_data, "images", "val")
    image = cv2.imread(osp.join(folder, sorted(os.listdir(folder))[0]))
    batch, metas = predictor.preprocess([image])
    (result,) = predictor.postprocess(predictor.infer(batch), metas)
    assert result is not None


def test_qat_checkpoint_into_float_config_is_one_clear_message(qat_run):
    from oars.pipelines.model import init_model

    cfg, _, record = qat_run
    with pytest.raises(OarsError, match="quantisation-aware"):
        init_model(cfg, record["checkpoint"])


def test_qat_options_reject_unknown_keys(qat_run):
    from oars.compress.qat import qat_options

    cfg, _, _ = qat_run
    with pytest.raises(OarsError, match="unknown QAT setting"):
        qat_options(cfg, {"qat": {"iterations": 3}})
    # tools/compress.py passes its whole option dict: the tool's keys are left alone, the known ones apply
    opts = qat_options(cfg, {"method": "qat", "variant": "q8", "export": False, "qat": {"iters": 7}})
    assert (opts["variant"], opts["export"], opts["iters"]) == ("q8", False, 7)


def test_batch_norm_fold_and_unfold_are_exact():
    """QAT folds batch norms into their convolutions; the FP32 reference unfolds them into the float layout
    (identity statistics carrying the folded bias): both must compute the float model's function."""
    import copy

    from mmengine.model import BaseModel
    from torch import nn

    from oars.compress.qat_model import fold_batch_norms, record_calls, unfold_state_dict

    class Net(BaseModel):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU())
            self.b = nn.Sequential(nn.Conv2d(4, 2, 1), nn.BatchNorm2d(2))  # a conv with its own bias

        def forward(self, inputs, data_samples=None, mode="tensor"):
            return self.b(self.a(inputs))

    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():
        for bn in (model.a[1], model.b[1]):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    model.eval()
    x = torch.randn(2, 3, 8, 8)
    expected = model(x)
    folded = copy.deepcopy(model)
    _, pairs = record_calls(folded, [2, 3, 8, 8])
    assert pairs == {"a.1": "a.0", "b.1": "b.0"}
    assert fold_batch_norms(folded, pairs) == ["a.1", "b.1"]
    assert isinstance(folded.a[1], nn.Identity)
    torch.testing.assert_close(folded(x), expected, atol=1e-5, rtol=1e-5)
    fresh = Net().eval()
    fresh.load_state_dict(unfold_state_dict(fresh, folded.state_dict(), [2, 3, 8, 8]), strict=True)
    torch.testing.assert_close(fresh(x), expected, atol=1e-5, rtol=1e-5)


def test_capture_shape_is_the_exports_with_a_batch_of_two():
    """QAT and distillation capture on the export's input: a video model's clips from its test pipeline (no export
    section needed), an image model's export.input_shape; the batch at least 2."""
    from oars.compress.qat import capture_shape
    from oars.config import load_config

    assert capture_shape(load_config(os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml"))) == [
        2, 8, 3, 64, 64]
    assert capture_shape(load_config(os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml"))) == [
        2, 3, 64, 64]


def test_qat_export_compares_on_calibration_files_read_as_deployed(qat_run, demo_data, tmp_path):
    """``compress.qat.calib_dir``: the INT8 graph is compared with the FP32 one on the task's calibration files, read
    by the task's reader (images here; a clip classifier's videos), as ``tools/export.py --int8`` reads them."""
    from oars.config import load_config
    from oars.pipelines.compress.qat_export import export_qat

    float_cfg, _, record = qat_run
    images = osp.join(str(demo_data), "images", "val")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        out = export_qat(load_config(record["config"]), float_cfg, record["checkpoint"], str(tmp_path / "export"),
                         {"calib_dir": images, "calib_num": 2})
    assert osp.isfile(out["onnx_int8"]) and "agreement" in printed.getvalue()
    with pytest.raises(OarsError, match="calib"):  # a folder without images: one message naming it
        export_qat(load_config(record["config"]), float_cfg, record["checkpoint"], str(tmp_path / "export2"),
                   {"calib_dir": str(tmp_path / "export"), "calib_num": 2})
