"""Export of a temporal localiser with its recognizer (video.export_localizer), on the shared shrunk export of
tests/video_segments_export.py (BMN at 16 channels x tscale 16, the demo TSM cut after its first stage, random
weights): the folder's files, deploy.yaml's segments section and both self-checks (the core's for the localiser,
the recognizer's own); the recognizer graph against the training extractor's features and class probabilities;
the refusals (no recognizer flags, another feature width, --half, the flags on a recognizer), told before anything
is written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from video_segments_export import BMN_CFG, SHRINK, bmn_checkpoint, segments_export

from oars.config import load_config
from oars.export.errors import ExportError
from oars.pipelines.export import export_model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return segments_export(tmp_path_factory)


def test_folder_and_deploy_yaml(exported):
    out = exported["dir"]
    assert sorted(p.name for p in out.iterdir()) == ["deploy.yaml", "model.onnx", "recognizer.onnx"]
    deploy = yaml.safe_load((out / "deploy.yaml").read_text())
    assert deploy["predictor"] == "video_segments" and deploy["preprocess"] == []
    assert deploy["labels"] == [f"class{i}" for i in range(8)]  # the recognizer's classes
    assert deploy["input"]["shape"] == [1, 16, 16] and deploy["input"]["layout"] == "NCT"
    assert [o["name"] for o in deploy["outputs"]] == ["confidence", "start", "end"]
    seg = deploy["segments"]
    assert (seg["snippet"], seg["stride"], seg["tscale"], seg["dscale"], seg["top_k"]) == (8, 4, 16, 12, 3)
    assert seg["soft_nms"] == {"alpha": 0.4, "low_threshold": 0.5, "high_threshold": 0.9, "top_k": 100}
    assert seg["max_proposals"] == 20 and seg["align_corners"] is False
    rec = seg["recognizer"]
    assert rec["onnx"] == "recognizer.onnx" and rec["input"]["shape"] == [-1, 8, 3, 64, 64]
    assert rec["input"]["layout"] == "NTCHW" and rec["feat_dim"] == 16 and rec["num_classes"] == 8
    assert rec["sampling"]["clip_len"] == 1 and rec["sampling"]["num_clips"] == 8
    assert [s["type"] for s in rec["preprocess"]][-2:] == ["Normalize", "FormatShape"]
    # the recognizer's own check ran (pre-processing through the clip predictor's code, then both outputs)
    assert set(rec["check"]["outputs"]) == {"features", "scores"} and rec["check"]["preprocess_max_abs_diff"] < 1e-5
    if exported["result"] is not None:  # this session exported it: the core's self-check of the localiser
        assert set(exported["result"]["check"]["outputs"]) == {"confidence", "start", "end"}
    from oars_deploy.deploy_config import read_deploy_yaml

    read_deploy_yaml(str(out / "deploy.yaml"))  # the plug-in's validation accepts it


def test_recognizer_graph_gives_the_extractors_outputs(exported):
    """recognizer.onnx on snippet clips = video.features.pooled.snippet_outputs (what BMN is trained on and what
    the class scores are made of), for a batch of another size than the traced one (the dynamic axis)."""
    import onnxruntime as ort

    from oars.pipelines.model import init_model
    from video.features.pooled import snippet_outputs

    model = init_model(load_config(exported["recognizer_config"]), exported["recognizer_weights"])
    g = torch.Generator().manual_seed(0)
    clips = [torch.randint(0, 256, (8, 3, 64, 64), generator=g, dtype=torch.uint8) for _ in range(3)]
    feats, probs = snippet_outputs(model, clips)
    assert feats.shape == (3, 16) and probs.shape == (3, 8)
    with torch.no_grad():
        x = model.data_preprocessor({"inputs": clips, "data_samples": None}, False)["inputs"].numpy()
    got = ort.InferenceSession(str(exported["dir"] / "recognizer.onnx")).run(["features", "scores"], {"clips": x})
    np.testing.assert_allclose(got[0], feats, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], probs, rtol=1e-4, atol=1e-5)


def test_refusals(exported, tmp_path):
    rec = {"recognizer_config": exported["recognizer_config"], "recognizer_weights": exported["recognizer_weights"]}
    cfg = load_config(BMN_CFG, SHRINK)
    with pytest.raises(ExportError, match="--recognizer-config RECOGNIZER_CFG --recognizer-weights"):
        export_model(cfg, exported["bmn_weights"], str(tmp_path / "a"))
    wide = SHRINK[1:] + ["model.feat_dim=64"]
    with pytest.raises(ExportError, match="model.feat_dim=64 but the recognizer"):
        export_model(load_config(BMN_CFG, wide), bmn_checkpoint(tmp_path, wide), str(tmp_path / "b"),
                     task_options=rec)
    with pytest.raises(ExportError, match="FP32 graphs only"):
        export_model(cfg, exported["bmn_weights"], str(tmp_path / "c"), half=True, task_options=rec)
    with pytest.raises(ExportError, match="apply to temporal localisers"):
        export_model(load_config(exported["recognizer_config"]), exported["recognizer_weights"], str(tmp_path / "d"),
                     task_options={"snippet": 8})
    assert not any((tmp_path / d).exists() and any((tmp_path / d).iterdir()) for d in "abcd")


def test_tools_export_flags_reach_the_task():
    """tools/export.py's command line for a BMN config takes the task's flags (oars.task_flags)."""
    import argparse

    from oars.task_flags import parse_task_command_line

    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[])
    line = parse_task_command_line(parser, ["-c", BMN_CFG, "--recognizer-config", "r.yaml", "--recognizer-weights",
                                            "r.pth", "--snippet", "16", "--top-k", "2"],
                                   lambda task, group: task.default_kind.exporter.export_arguments(group), "export",
                                   load_config)
    assert line.task_values == {"recognizer_config": "r.yaml", "recognizer_weights": "r.pth", "snippet": 16,
                                "top_k": 2}
