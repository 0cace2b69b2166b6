"""tools/eval.py --model-dir EXPORT_DIR: an export evaluated through the torch-free predictor gives the metrics the
checkpoint gives (same data, same evaluator), and the wrong inputs are refused with one message."""

from __future__ import annotations

import json
import os.path as osp

import pytest
from demo_utils import demo_overrides, run_tool

from oars.engine.entry import evaluate
from oars.errors import OarsError

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SEG_CFG = osp.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")
# output_op none: the predictor resizes the logits and takes the argmax, as the segmentor does (exact labels)
SEG_SHRINK = ["model.backbone.base_channels=4", "model.decode_head.channels=4", "export.output_op=none"]


def _random_export(tmp_path, cfg_path: str, shrink: list[str]) -> tuple[str, str]:
    from deploy.test_deploy_python_predictor import _random_checkpoint
    from oars.pipelines.export import export_model

    ckpt = _random_checkpoint(cfg_path, shrink, str(tmp_path / "model.pth"))
    out = str(tmp_path / "export")
    export_model(cfg_path, ckpt, out, overrides=shrink)
    return ckpt, out


def test_segmentation_export_metrics_equal_the_checkpoints(demo_data, tmp_path):
    """Same data, same evaluator: the export's mIoU is the checkpoint's exactly (output_op none: the same labels)."""
    ckpt, model_dir = _random_export(tmp_path, SEG_CFG, SEG_SHRINK)
    opts = [*demo_overrides(demo_data)[:12], *SEG_SHRINK]
    torch_run = evaluate(SEG_CFG, ckpt, opts, work_dir=str(tmp_path / "torch"))
    onnx_run = evaluate(SEG_CFG, None, opts, work_dir=str(tmp_path / "onnx"), model_dir=model_dir)
    assert set(onnx_run["metrics"]) == set(torch_run["metrics"]) and 0 < torch_run["metrics"]["mIoU"] < 1
    assert onnx_run["metrics"] == torch_run["metrics"]
    with open(onnx_run["metrics_file"]) as f:
        written = json.load(f)
    assert written["model_dir"] == model_dir and "checkpoint" not in written


def test_detection_results_fill_the_fields_the_metric_reads():
    """A runtime detection result (original pixels) read back by the detection metric's accessors unchanged."""
    import numpy as np
    from mmengine.structures import InstanceData

    from detection.evaluation.gt_utils import predicted_masks, predictions
    from detection.structures import DetDataSample
    from oars.tasks import get_task

    rng = np.random.default_rng(0)
    result = {"bboxes": rng.uniform(0, 50, (3, 4)).astype(np.float32), "scores": np.float32([0.9, 0.5, 0.1]),
              "labels": np.int64([2, 0, 1]), "masks": rng.random((3, 20, 30)) > 0.5}
    sample = DetDataSample(metainfo={"ori_shape": (20, 30), "img_path": "a.png"})
    sample.gt_instances = InstanceData()
    get_task("detection").exporter({}).prediction_from_export(result, sample)
    got = predictions(sample)
    np.testing.assert_allclose(got["bboxes"], result["bboxes"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(got["scores"], result["scores"], rtol=0, atol=1e-7)
    np.testing.assert_array_equal(got["labels"], result["labels"])
    np.testing.assert_array_equal(predicted_masks(sample), result["masks"])


def test_model_dir_refusals(demo_data, tmp_path):
    opts = demo_overrides(demo_data)
    with pytest.raises(OarsError, match="either -w CHECKPOINT .* or --model-dir"):
        evaluate(SEG_CFG, "x.pth", opts, model_dir=str(tmp_path))
    with pytest.raises(OarsError, match=r"--model-dir .*: no deploy.yaml there"):
        evaluate(SEG_CFG, None, opts, model_dir=str(tmp_path))
    proc = run_tool("eval.py", "-c", SEG_CFG, "--model-dir", str(tmp_path), "-w", "x.pth", check=False)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_eval_model_dir_takes_every_runtime_backend(demo_data, tmp_path):
    """``tools/eval.py --backend openvino`` evaluates the export's OpenVINO IR (the label maps of U-Net agree with
    ONNX Runtime's, so the mIoU is the same); a backend whose file the export lacks is one message naming it."""
    pytest.importorskip("openvino", reason="the edge extra (pip install -e '.[edge]') is not installed")
    from deploy.test_deploy_python_predictor import _random_checkpoint
    from oars.pipelines.export import export_model

    ckpt = _random_checkpoint(SEG_CFG, SEG_SHRINK, str(tmp_path / "model.pth"))
    model_dir = str(tmp_path / "export")
    export_model(SEG_CFG, ckpt, model_dir, fmt="openvino", overrides=SEG_SHRINK)
    opts = [*demo_overrides(demo_data)[:12], *SEG_SHRINK]
    runs = {}
    for backend in ("onnxruntime", "openvino"):
        proc = run_tool("eval.py", "-c", SEG_CFG, "--model-dir", model_dir, "--backend", backend,
                        "--work-dir", str(tmp_path / backend), "-o", *opts)
        with open(tmp_path / backend / "metrics.json") as f:
            runs[backend] = json.load(f)["metrics"]
        assert proc.returncode == 0
    assert 0 < runs["onnxruntime"]["mIoU"] < 1
    assert runs["openvino"]["mIoU"] == pytest.approx(runs["onnxruntime"]["mIoU"], abs=1e-3)
    proc = run_tool("eval.py", "-c", SEG_CFG, "--model-dir", model_dir, "--backend", "mnn", "-o", *opts,
                    check=False)
    assert proc.returncode != 0 and "mnn" in proc.stderr and "Traceback" not in proc.stderr
