"""Every config in configs/ exports (shrunk, 64-px input) and ONNX Runtime reproduces PyTorch.

Exports are slow (the dynamo exporter traces the whole network), so one config per architecture (model, backbone,
neck, heads, test mode; demo configs first) is exported: shrunk, the others of an architecture (R50 vs R101, VOC vs
COCO) are the same graph, and every config's export section is checked against its test pipeline below. The
segmentation demo architecture is exported by test_export_core.py already.
"""

from __future__ import annotations

import glob
import os

import pytest
from demo_utils import DEMO_CFG, ROOT
from export_cases import shrunk_export_case

from oars.config import load_config
from oars.export import preprocess_steps, read_deploy_yaml
from oars.pipelines.export import export_model

# Image configs: video exports take their clip shape from the test pipeline (no export section needed) and are
# exported with parity per architecture in tests/video/export/test_vid_export.py; GAN generators (several inputs:
# noise + label, image + attributes) in tests/gan/test_gan_export.py and tests/deploy/test_gan_predictor.py.
OWN_EXPORT_TESTS = [os.path.join("configs", "video"), os.path.join("configs", "gan")]
CONFIGS = sorted(c for c in glob.glob(os.path.join(ROOT, "configs", "**", "*.yaml"), recursive=True)
                 if "_base_" not in c and not any(folder in c for folder in OWN_EXPORT_TESTS))
# The torchvision presets resize inside the model (TorchvisionRCNNPreprocessor), which deploy.yaml's steps cannot
# express: they have no export section.
EXPORTABLE = [c for c in CONFIGS if "export" in load_config(c)]


def _architecture(path: str) -> tuple:
    model = load_config(path).model

    def kind(key: str) -> object:
        part = model.get(key)
        return [p.get("type") for p in part] if isinstance(part, list) else part and part.get("type")

    heads = tuple(str(kind(k)) for k in ("neck", "decode_head", "auxiliary_head", "bbox_head"))
    return model.type, model.backbone.type, heads, (model.get("test_cfg") or {}).get("mode")


def _params() -> list:
    seen = {_architecture(DEMO_CFG)}
    params = []
    for path in sorted(EXPORTABLE, key=lambda p: "demo" not in p):
        if "roi_head" in load_config(path).model:
            continue  # two-stage graphs: exported with parity in tests/detection/export/test_export_two_stage.py
        sig = _architecture(path)
        if sig in seen:
            continue  # the same graph once shrunk
        seen.add(sig)
        params.append(pytest.param(path, id=os.path.relpath(path, os.path.join(ROOT, "configs"))))
    return params


def test_every_config_is_covered():
    assert len(CONFIGS) >= 16
    unexportable = set(CONFIGS) - set(EXPORTABLE)  # the torchvision presets and the recipes built on them
    assert all(load_config(c).model.data_preprocessor.type.startswith("Torchvision") for c in unexportable)


@pytest.mark.parametrize("path", EXPORTABLE,
                         ids=[os.path.relpath(c, os.path.join(ROOT, "configs")) for c in EXPORTABLE])
def test_export_section_fits_the_test_pipeline(path):
    """As written (full size): export.input_shape is a size the test pipeline + data preprocessor produce."""
    steps = preprocess_steps(load_config(path))
    assert [s["type"] for s in steps] == ["Resize", "Normalize", "Pad", "Permute"]


@pytest.mark.parametrize("path", _params())
def test_config_exports_with_parity(path, tmp_path):
    cfg, ckpt = shrunk_export_case(path, str(tmp_path))
    result = export_model(cfg, ckpt, str(tmp_path / "export"))
    deploy = read_deploy_yaml(result["deploy"])
    assert deploy["model"]["task"] == cfg.default_scope
    assert deploy["input"]["shape"] == [1, 3, 64, 64]
    assert len(deploy["labels"]) == cfg.model.num_classes
    assert set(result["check"]["outputs"]) == {o["name"] for o in deploy["outputs"]}
    assert result["check"]["preprocess_max_abs_diff"] <= 1e-6
