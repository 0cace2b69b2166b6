"""GAN generator export: ONNX Runtime reproduces the model's own prediction (EMA generator, 0..255 in/out), the
dynamic batch, deploy.yaml's gan section, and tools/infer.py's gan.apis gives the deployed predictor's images."""

from __future__ import annotations

import cv2
import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml
from mmengine.config import Config

from gan.apis import run_inference
from gan.registry import MODELS
from oars.export.errors import ExportError
from oars.pipelines.export import export_model
from oars_deploy.predictors.gan_images.config import make_labels, make_noise
from oars_deploy.predictors.gan_images.predictor import GANPredictor

ATTRS = ["Black_Hair", "Blond_Hair", "Male"]
CGAN = {"type": "CGAN", "noise_size": 16, "num_classes": 4, "ema_config": {"momentum": 0.5},
        "generator": {"type": "DCGANGenerator", "ngf": 8, "output_size": 28}}
STARGAN = {"type": "StarGAN", "attr_names": ATTRS,
           "generator": {"type": "StarGANGenerator", "conv_dim": 8, "num_blocks": 2}}


def _export(tmp_path, model_cfg: dict, dynamic: bool, shape=(2, 3, 32, 32), perturb_ema: bool = False):
    model = MODELS.build(model_cfg)
    model.init_weights()
    if perturb_ema:  # the EMA copy differs from the trained generator: the graph must use the EMA one
        with torch.no_grad():
            for p in model.generator_ema.module.parameters():
                p.add_(0.05 * torch.randn_like(p))
    ckpt = tmp_path / "model.pth"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    cfg = Config({"default_scope": "gan", "model": model_cfg, "export": {"input_shape": list(shape)}})
    out = tmp_path / "export"
    result = export_model(cfg, str(ckpt), str(out), dynamic=dynamic)
    return model.eval(), cfg, ckpt, out, result


@pytest.mark.slow
def test_cgan_export_ema_dynamic_and_infer_parity(tmp_path):
    model, cfg, ckpt, out, result = _export(tmp_path, CGAN, dynamic=True, perturb_ema=True)
    assert result["check"]["dynamic_batch"]["batch"] == 3
    deploy = yaml.safe_load((out / "deploy.yaml").read_text())
    gan = deploy["gan"]
    assert gan["kind"] == "noise" and gan["z_dim"] == 16 and gan["num_classes"] == 4
    assert [i["name"] for i in gan["inputs"]] == ["noise", "label"] and gan["inputs"][1]["dtype"] == "int64"
    assert gan["class_names"] == ["0", "1", "2", "3"] and deploy["input"]["shape"] == [-1, 16]

    # ORT at batch 5 vs the model's own predict (EMA generator, destruct to 0..255)
    noise, labels = make_noise(7, 5, 16), make_labels(None, 5, 4)
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {"noise": noise, "label": labels})[0]
    inputs = {"noise": torch.from_numpy(noise), "label": torch.from_numpy(labels)}
    samples = model.predict(inputs)
    expected = np.stack([s.fake_img.numpy() for s in samples])
    assert got.shape == (5, 3, 28, 28) and got.min() >= 0 and got.max() <= 255
    np.testing.assert_allclose(got, expected, atol=1e-3)
    plain = model.data_preprocessor.destruct(model.generator(inputs["noise"], inputs["label"])).detach().numpy()
    assert np.abs(plain - expected).max() > 1.0  # not the non-EMA generator

    # the predictor and tools/infer.py (gan.apis) write the same samples for the same seed and label
    predictor = GANPredictor(str(out))
    deployed = predictor.generate(make_noise(3, 3, 16), make_labels(2, 3, 4))
    written = run_inference(cfg, str(ckpt), None, str(tmp_path / "infer"), seed=3, num=3, label=2)
    assert [p.rsplit("/", 1)[1] for p in written] == ["sample_000.png", "sample_001.png", "sample_002.png",
                                                      "grid.png"]
    for img, path in zip(deployed, written):
        assert np.abs(cv2.imread(path).astype(int) - img.astype(int)).max() <= 1
    from oars_deploy.cli import run as oars_infer
    from oars_deploy.records import read_results

    oars_infer(["--model-dir", str(out), "-o", str(tmp_path / "cli"), "--seed", "3", "--num", "3", "--label", "2"])
    records = read_results(str(tmp_path / "cli"))  # results.jsonl: one line per sample, the same from both
    assert records == read_results(str(tmp_path / "infer"))
    assert [(r["predictor"], r["input"], r["images"], r["seed"], r["index"], r["label"], r["class"])
            for r in records] == [("gan_images", None, [f"sample_00{i}.png"], 3, i, 2, "2") for i in range(3)]
    with pytest.raises(Exception, match="takes no -i"):
        run_inference(cfg, str(ckpt), "x.png", str(tmp_path / "bad"))
    with pytest.raises(ExportError, match="--half / --int8"):
        export_model(cfg, str(ckpt), str(tmp_path / "half"), half=True)


@pytest.mark.slow
def test_attribute_model_export(tmp_path):
    if "StarGAN" not in MODELS.module_dict:
        pytest.skip("StarGAN is not in gan.models yet")
    model, cfg, ckpt, out, result = _export(tmp_path, STARGAN, dynamic=False)
    deploy = yaml.safe_load((out / "deploy.yaml").read_text())
    gan = deploy["gan"]
    assert gan["kind"] == "image_attrs" and gan["attr_names"] == ATTRS and gan["input_size"] == [32, 32]
    assert [i["name"] for i in gan["inputs"]] == ["image", "attrs"] and deploy["input"]["shape"] == [2, 3, 32, 32]
    # ORT on a uint8 RGB image (0..255) vs the model's predict path (data preprocessor -> [-1, 1] -> destruct)
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (2, 3, 32, 32)).astype(np.float32)
    attrs = np.array([[1, 0, 1], [0, 1, 0]], dtype=np.float32)
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {"image": img, "attrs": attrs})[0]
    x = model.data_preprocessor({"inputs": {"img": list(torch.from_numpy(img).to(torch.uint8)),
                                            "attrs": list(torch.from_numpy(attrs))}}, False)["inputs"]
    expected = model.data_preprocessor.destruct(model.export_forward(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-3)


# The other generators of the shipped configs (CGAN and StarGAN above): each exports shrunk and passes the export's
# own ONNX Runtime vs PyTorch check (a mismatch raises ExportCheckError).
OTHER_CONFIGS = ["dcgan/dcgan_mnist.yaml", "pix2pix/pix2pix_facades.yaml", "cyclegan/cyclegan_horse2zebra.yaml",
                 "attgan/attgan_celeba.yaml", "stgan/stgan_celeba.yaml"]


@pytest.mark.slow
@pytest.mark.parametrize("name", OTHER_CONFIGS)
def test_every_generator_exports_with_parity(name, tmp_path):
    import os

    from config_checks_gan import shrink_model
    from demo_utils import ROOT

    from oars.config import load_config

    model_cfg = shrink_model(load_config(os.path.join(ROOT, "configs", "gan", name)).model.to_dict())
    noise_model = model_cfg["type"] in ("DCGAN", "CGAN")
    model = MODELS.build(model_cfg)
    model.init_weights()
    ckpt = tmp_path / "model.pth"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    export = {"batch": 1} if noise_model else {"input_shape": [1, 3, 32, 32]}
    cfg = Config({"default_scope": "gan", "model": model_cfg, "export": export})
    result = export_model(cfg, str(ckpt), str(tmp_path / "export"))
    outputs = result["check"]["outputs"]
    assert outputs and all(v["max_abs_diff"] <= v["tolerance"] for v in outputs.values()), outputs
    deploy = yaml.safe_load((tmp_path / "export" / "deploy.yaml").read_text())
    assert deploy["gan"]["kind"] == ("noise" if noise_model else "image_attrs" if "attr_names" in model_cfg
                                     else "image")
