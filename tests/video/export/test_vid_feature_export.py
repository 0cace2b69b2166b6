"""tools/export.py for frame-feature models (shrunk AttentionLSTM / AttentionCluster / NeXtVLAD): the packed
``features`` input [N, max_frames, sum D + 1], deploy.yaml's ``features`` section, the ONNX Runtime vs PyTorch
self-check with a dynamic batch, and the errors for test pipelines that cannot be deployed."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from mmengine.config import Config
from vid_feature_cases import CLASSES, DIMS, MAX_FRAMES, checkpoint, feature_config

from oars.export import ExportError, read_deploy_yaml
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from video.export import export_options, preprocess_steps
from video.export_features import describe_feature_pipeline

WIDTH = sum(DIMS.values()) + 1


@pytest.mark.parametrize("name,multi_label", [
    pytest.param("attention_lstm", False, marks=pytest.mark.slow),  # two LSTMs per modality: ~11 s to trace
    ("attention_cluster", False), ("nextvlad", True)])
def test_export_dynamic_batch(tmp_path, name, multi_label):
    cfg = feature_config(str(tmp_path), name, multi_label=multi_label)
    ckpt = checkpoint(cfg)
    result = export_model(cfg, ckpt, str(tmp_path / "out"), dynamic=True)
    check = result["check"]
    assert check["preprocess_max_abs_diff"] == 0.0  # the predictor's loading = the pipeline + preprocessor's
    assert check["outputs"]["scores"]["max_abs_diff"] < 1e-5
    assert check["dynamic_batch"]["batch"] == 3 and check["dynamic_batch"]["outputs"]["scores"]["max_abs_diff"] < 1e-5
    deploy = read_deploy_yaml(str(tmp_path / "out" / "deploy.yaml"))
    assert deploy["input"]["shape"] == [-1, MAX_FRAMES, WIDTH] and deploy["input"]["layout"] == "NTD"
    assert deploy["features"] == {"modalities": [{"name": "rgb", "dim": 12}, {"name": "audio", "dim": 6}],
                                  "max_frames": MAX_FRAMES, "min_quantized_value": -2.0, "max_quantized_value": 2.0}
    assert deploy["preprocess"] == [] and "sampling" not in deploy
    assert deploy["postprocess"]["multi_label"] is multi_label and deploy["labels"] == CLASSES

    # independent of the self-check: the graph on hand-packed features of 4 samples (valid lengths 8, 5, 1, 3)
    # equals the recognizer on the unpacked dict; padded frames hold garbage that must not matter
    model = init_model(Config.fromfile(cfg), ckpt)
    gen = torch.Generator().manual_seed(1)
    lengths = torch.tensor([MAX_FRAMES, 5, 1, 3])
    mask = torch.arange(MAX_FRAMES)[None] < lengths[:, None]
    feats = {m: torch.randn(4, MAX_FRAMES, d, generator=gen) * 2 for m, d in DIMS.items()}
    packed = torch.cat([feats["rgb"], feats["audio"], mask.float()[..., None]], dim=2)
    with torch.no_grad():
        ref = model({**feats, "mask": mask}, None, mode="tensor").numpy()
    session = ort.InferenceSession(result["onnx"], providers=["CPUExecutionProvider"])
    scores = session.run(None, {"features": packed.numpy()})[0]
    np.testing.assert_allclose(scores, ref, atol=1e-5)
    if multi_label:
        assert ((scores > 0) & (scores < 1)).all() and np.abs(scores.sum(1) - 1).max() > 1e-2  # sigmoid per class
    else:
        np.testing.assert_allclose(scores.sum(1), 1.0, atol=1e-5)  # softmax
    assert np.abs(scores[1:] - scores[:1]).max() > 1e-3  # the samples get different answers: the test can fail


# ----------------------------------------------------------------------------- errors (no model built)
def _cfg(tmp_path, edit=None, **export):
    cfg = Config.fromfile(feature_config(str(tmp_path), "attention_cluster", **export))
    if edit:
        edit(cfg.test_dataloader.dataset.pipeline)
    return cfg


def test_options_and_no_preprocess_steps(tmp_path):
    cfg = _cfg(tmp_path, batch=2)
    assert export_options(cfg).input_shape == (2, MAX_FRAMES, WIDTH)
    assert export_options(_cfg(tmp_path), dynamic=True).input_shape == (2, MAX_FRAMES, WIDTH)  # trace batch >= 2
    assert preprocess_steps(cfg) == []


def test_input_shape_must_be_the_packed_shape(tmp_path):
    with pytest.raises(ExportError, match=rf"set export.input_shape to \[1, {MAX_FRAMES}, {WIDTH}\]"):
        export_options(_cfg(tmp_path, input_shape=[1, MAX_FRAMES, WIDTH - 1]))


def test_random_frame_selection_is_refused(tmp_path):
    with pytest.raises(ExportError, match="test_mode must be true"):
        describe_feature_pipeline(_cfg(tmp_path, edit=lambda p: p[0].update(test_mode=False)))


def test_unsupported_step_and_missing_modality_are_named(tmp_path):
    cfg = _cfg(tmp_path, edit=lambda p: p.insert(1, dict(type="Flip")))
    with pytest.raises(ExportError, match=r"step 1 \(Flip\) cannot be expressed"):
        describe_feature_pipeline(cfg)
    cfg = _cfg(tmp_path, edit=lambda p: p[0].update(modalities=["rgb"]))
    with pytest.raises(ExportError, match=r"LoadFeatures.modalities=\['rgb'\] lacks \['audio'\]"):
        describe_feature_pipeline(cfg)


@pytest.mark.parametrize("path,shape", [
    ("configs/video/attention_cluster/attention_cluster_demo_features.yaml", (1, 16, 1024 + 128 + 1)),
    ("configs/video/attention_cluster/attention_cluster_youtube8m.yaml", (1, 300, 1024 + 128 + 1)),
    ("configs/video/attention_lstm/attention_lstm_youtube8m.yaml", (1, 300, 1024 + 128 + 1)),
    ("configs/video/nextvlad/nextvlad_youtube8m.yaml", (1, 300, 1024 + 128 + 1))])
def test_shipped_feature_configs_are_exportable(path, shape):
    """The repository's feature configs describe a deployable input (rgb 1024 + audio 128 + mask, max_frames)."""
    from demo_utils import ROOT

    from oars.config import load_config

    cfg = load_config(f"{ROOT}/{path}")
    assert export_options(cfg).input_shape == shape
    assert [m["name"] for m in describe_feature_pipeline(cfg)["modalities"]] == ["rgb", "audio"]
