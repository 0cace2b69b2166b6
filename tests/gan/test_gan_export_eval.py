"""gan.export_eval.ExportedGenerator (what ``tools/eval.py --model-dir`` runs on a GAN export): the config's model
predicting a test batch with the exported graph in place of its generator gives the model's own prediction, to the
rounding of the deployed pixels, with the same seeded noise, labels, target attributes and real copies; fields
from a network the export lacks (CycleGAN's other direction) are left out. The end-to-end metrics test through
the tool is tests/test_tools_gan.py."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from config_checks_gan import shrink_model
from demo_utils import ROOT
from mmengine.config import Config

from gan.export_eval import ExportedGenerator
from gan.registry import MODELS
from gan.structures import GANDataSample
from oars.config import load_config
from oars.pipelines.export import export_model

BATCH, SIZE = 3, 32
CASES = {  # config, export section (STGAN: a fixed batch of 2 fed a batch of 3: chunked and padded)
    "cgan": ("cgan/cgan_demo_digits.yaml", {"batch": 1}),
    "stgan": ("stgan/stgan_celeba.yaml", {"input_shape": [2, 3, SIZE, SIZE]}),
    "cyclegan": ("cyclegan/cyclegan_horse2zebra.yaml", {"input_shape": [1, 3, SIZE, SIZE]}),
}


def _batch(model, name: str) -> dict:
    """A packed test batch as the GAN pipelines give it: uint8 [3, H, W] images, labels, 0/1 attributes."""
    rng = np.random.default_rng(0)

    def images() -> list[torch.Tensor]:
        return [torch.from_numpy(rng.integers(0, 256, (3, SIZE, SIZE), dtype=np.uint8)) for _ in range(BATCH)]

    if name == "cgan":
        return {"img": images(), "label": [torch.tensor(i % model.num_classes) for i in range(BATCH)]}
    if name == "stgan":
        return {"img": images(), "attrs": [torch.from_numpy((rng.random(model.num_attrs) > 0.5).astype(np.float32))
                                           for _ in range(BATCH)]}
    return {"img_A": images(), "img_B": images()}


@pytest.mark.parametrize("name", list(CASES))
def test_exported_generator_predicts_as_the_model(name, tmp_path):
    config, export = CASES[name]
    model_cfg = shrink_model(load_config(os.path.join(ROOT, "configs", "gan", config)).model.to_dict())
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    torch.save({"state_dict": model.state_dict()}, tmp_path / "model.pth")
    cfg = Config({"default_scope": "gan", "model": model_cfg, "export": export})
    export_model(cfg, str(tmp_path / "model.pth"), str(tmp_path / "export"))
    model.eval()

    inputs = _batch(model, name)
    samples = [GANDataSample(metainfo={"sample_idx": 10 + i}) for i in range(BATCH)]
    with torch.no_grad():
        data = model.data_preprocessor({"inputs": inputs, "data_samples": samples}, False)
        expected = model.predict(data["inputs"], data["data_samples"])
    exported = ExportedGenerator(str(tmp_path / "export"), model_cfg)
    got = exported.predict([{"inputs": {k: v[i] for k, v in inputs.items()},
                             "sample": GANDataSample(metainfo={"sample_idx": 10 + i})} for i in range(BATCH)])
    assert len(got) == BATCH
    for g, e in zip(got, expected):
        fake = g.fake_img.numpy()
        assert np.array_equal(fake, np.rint(fake)), "the deployed pixels are whole values"
        assert np.abs(fake - e.fake_img.numpy()).max() <= 0.5 + 1e-3  # rounding only: same inputs, same network
        shared = sorted(set(e.keys()) - set(model.unexported_fields))
        assert sorted(g.keys()) == shared
        for key in shared:
            if key != "fake_img":  # real copies, target / source attributes: the batch's own
                assert torch.equal(g.get(key), e.get(key)), key
    if name == "cyclegan":
        assert "fake_B_to_A" in expected[0] and "fake_B_to_A" not in got[0]


def test_refusals(tmp_path):
    """An export of another model, a test batch of another size than the export's, a folder that is not a
    generator export, and a config without a model section: one message each."""
    import yaml

    from oars.errors import OarsError
    from oars.models.exported import ExportedModel
    from oars.tasks import get_task

    model_cfg = shrink_model(load_config(os.path.join(ROOT, "configs/gan/cgan/cgan_demo_digits.yaml")).model.to_dict())
    model = MODELS.build(model_cfg)
    torch.save({"state_dict": model.state_dict()}, tmp_path / "model.pth")
    cfg = Config({"default_scope": "gan", "model": model_cfg, "export": {"batch": 1}})
    out = tmp_path / "export"
    export_model(cfg, str(tmp_path / "model.pth"), str(out))
    pix2pix = shrink_model(load_config(os.path.join(ROOT, "configs/gan/pix2pix/pix2pix_facades.yaml")).model.to_dict())
    with pytest.raises(OarsError, match=rf"--model-dir {out}: the export takes \['label', 'noise'\], but the "
                                        r"config's Pix2Pix feeds its generator \['img'\]"):
        ExportedModel(str(out), scope="gan", model_cfg=pix2pix)

    pix_cfg = Config({"default_scope": "gan", "model": pix2pix, "export": {"input_shape": [1, 3, SIZE, SIZE]}})
    torch.save({"state_dict": MODELS.build(pix2pix).state_dict()}, tmp_path / "pix.pth")
    export_model(pix_cfg, str(tmp_path / "pix.pth"), str(tmp_path / "pix"))
    exported = ExportedModel(str(tmp_path / "pix"), scope="gan", model_cfg=pix2pix)
    images = [torch.zeros(3, 2 * SIZE, 2 * SIZE, dtype=torch.uint8)]
    with pytest.raises(OarsError, match=r"the test batch gives the generator's 'img' as \[3, 64, 64\] per sample, "
                                        r"the export's input 'image' takes \[3, 32, 32\]"):
        exported.test_step({"inputs": {"img_A": images, "img_B": images}, "data_samples": [GANDataSample()]})

    deploy = yaml.safe_load((out / "deploy.yaml").read_text())
    del deploy["gan"]  # what an image model's export is to the generator's runtime
    (out / "deploy.yaml").write_text(yaml.safe_dump(deploy))
    with pytest.raises(OarsError, match=rf"--model-dir {out}: .*not a GAN generator \(no `gan` section,"):
        ExportedModel(str(out), scope="gan", model_cfg=model_cfg)
    with pytest.raises(OarsError, match="the config has none"):
        get_task("gan").default_kind.exporter.export_predictor(str(tmp_path), "cpu", "onnxruntime", None)
