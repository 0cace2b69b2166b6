"""--half for the non-image graphs: a clip classifier (TSM) and a frame-feature classifier (Attention-LSTM) export an
FP16 graph that agrees with the FP32 one (INT8 of a clip classifier: test_vid_export_eval_int8.py)."""

from __future__ import annotations

import pytest
import vid_export_cases
import vid_feature_cases

from oars.export import read_deploy_yaml
from oars.pipelines.export import export_model

pytestmark = pytest.mark.slow  # two exports with their self-checks (about 15 s)


@pytest.mark.parametrize("kind", ["clip", "features"])
def test_half_export_of_video_models(tmp_path, kind):
    if kind == "clip":
        cfg = vid_export_cases.video_config(str(tmp_path), "tsm", "CenterCrop")
        ckpt = vid_export_cases.checkpoint(cfg)
    else:
        cfg = vid_feature_cases.feature_config(str(tmp_path), "attention_lstm")
        ckpt = vid_feature_cases.checkpoint(cfg)
    result = export_model(cfg, ckpt, str(tmp_path / "export"), half=True)
    precision = result["check"]["precision"]
    assert precision["precision"] == "fp16"
    assert all(v >= precision["min_agreement"] for v in precision["agreement"].values()), precision
    deploy = read_deploy_yaml(str(tmp_path / "export" / "deploy.yaml"))
    assert deploy["model"]["onnx"] == "model_fp16.onnx" and deploy["model"]["precision"] == "fp16"
