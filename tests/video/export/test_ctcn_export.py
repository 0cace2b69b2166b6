"""Export of a C-TCN with its recognizer (video.export_ctcn), on the shared shrunk export of
tests/video_ctcn_export.py (RGB-only C-TCN over the tiny recognizer's 16 channels at temporal_dim 32, 45 anchors, 3
classes, random weights): the folder's files, deploy.yaml (C-TCN's own labels, the anchors file, the decode
parameters from the config), the localiser graph against the model's tensor mode, and the refusals (RGB + flow,
--top-k, a stream width other than the recognizer's), told before anything is written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from mmengine.registry import DefaultScope
from video_ctcn_export import CTCN_CFG, CTCN_CLASSES, CTCN_SHRINK, NUM_ANCHORS, ctcn_checkpoint, ctcn_export

from oars.config import load_config
from oars.export.errors import ExportError
from oars.pipelines.export import export_model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    with DefaultScope.overwrite_default_scope("video"):
        return ctcn_export(tmp_path_factory)


@pytest.fixture(scope="module")
def model(exported):
    from oars.pipelines.model import init_model

    with DefaultScope.overwrite_default_scope("video"):
        return init_model(load_config(CTCN_CFG, CTCN_SHRINK), exported["ctcn_weights"]).eval()


def test_folder_and_deploy_yaml(exported, model):
    out = exported["dir"]
    assert sorted(p.name for p in out.iterdir()) == ["anchors.npy", "deploy.yaml", "model.onnx", "recognizer.onnx"]
    deploy = yaml.safe_load((out / "deploy.yaml").read_text())
    assert deploy["predictor"] == "video_segments" and deploy["labels"] == CTCN_CLASSES  # C-TCN's, not the recognizer's
    assert deploy["input"]["shape"] == [1, 16, 32] and deploy["input"]["layout"] == "NCT"
    assert [(o["name"], o["shape"]) for o in deploy["outputs"]] == [("offsets", [1, NUM_ANCHORS, 2]),
                                                                     ("probs", [1, NUM_ANCHORS, 4])]
    seg = deploy["segments"]
    assert (seg["localizer"], seg["anchors"], seg["num_anchors"], seg["num_classes"]) == ("ctcn", "anchors.npy",
                                                                                          NUM_ANCHORS, 3)
    assert (seg["snippet"], seg["stride"], seg["tscale"], seg["max_proposals"]) == (8, 4, 32, 100)
    assert not {"dscale", "soft_nms", "top_k"} & set(seg)  # BMN's post-processing keys
    # the config's test_cfg (configs/_base_/models/ctcn_512.yaml) and the coder's variances
    assert seg["decode"] == {"variances": [0.1, 0.2], "score_thresh": 0.001, "nms_thresh": 0.8, "soft_sigma": 0.9,
                             "soft_thresh": 0.004, "pre_nms_top_k": 200, "max_per_video": 1000}
    assert seg["recognizer"]["feat_dim"] == 16 and set(seg["recognizer"]["check"]["outputs"]) == {"features",
                                                                                                   "scores"}
    anchors = np.load(out / "anchors.npy")
    assert anchors.dtype == np.float32 and anchors.shape == (NUM_ANCHORS, 2)
    np.testing.assert_array_equal(anchors, model.anchors.numpy())
    if exported["result"] is not None:  # this session exported it: the core's self-check of the localiser
        assert set(exported["result"]["check"]["outputs"]) == {"offsets", "probs"}
    from oars_deploy.deploy_config import read_deploy_yaml

    read_deploy_yaml(str(out / "deploy.yaml"))  # the plug-in's validation accepts it


def test_graph_equals_tensor_mode(exported, model):
    """model.onnx on features of another seed than the self-check's = CTCN(mode='tensor'): no decoding inside."""
    import onnxruntime as ort

    x = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        offsets, probs = model(x, mode="tensor")
    got = ort.InferenceSession(str(exported["dir"] / "model.onnx")).run(["offsets", "probs"], {"features": x.numpy()})
    np.testing.assert_allclose(got[0], offsets.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], probs.numpy(), rtol=1e-4, atol=1e-5)


def test_refusals(exported, tmp_path):
    from oars.tasks import get_task

    rec = {"recognizer_config": exported["recognizer_config"], "recognizer_weights": exported["recognizer_weights"]}
    # PaddleVideo's RGB + flow setting (the config as shipped): refused before any model is built
    with DefaultScope.overwrite_default_scope("video"), \
            pytest.raises(ExportError, match=r"model.streams=\{'rgb': 201, 'flow': 201\}: a C-TCN exports with one "
                                             r"feature stream.*RGB-only C-TCN: model.streams: \{rgb: W\}"):
        get_task("video").exporter(load_config(CTCN_CFG)).check_export(load_config(CTCN_CFG), "onnx", "fp32")
    cfg = load_config(CTCN_CFG, CTCN_SHRINK)
    with pytest.raises(ExportError, match="C-TCN scores its own classes per segment"):
        export_model(cfg, exported["ctcn_weights"], str(tmp_path / "a"), task_options={**rec, "top_k": 2})
    wide = CTCN_SHRINK + ["model.streams={_delete_: true, rgb: 24}"]
    (tmp_path / "w").mkdir()
    with pytest.raises(ExportError, match=r"model.streams=24 but the recognizer .* gives 16-channel features"):
        export_model(load_config(CTCN_CFG, wide), ctcn_checkpoint(tmp_path / "w", wide), str(tmp_path / "b"),
                     task_options=rec)
    with pytest.raises(ExportError, match="--recognizer-config RECOGNIZER_CFG --recognizer-weights"):
        export_model(cfg, exported["ctcn_weights"], str(tmp_path / "c"))
    assert not any((tmp_path / d).exists() and any((tmp_path / d).iterdir()) for d in "abc")
