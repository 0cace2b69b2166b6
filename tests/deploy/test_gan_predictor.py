"""The deployed GAN predictor (oars-infer, no torch in the loop): an image model exported with a fixed batch
translates a folder (padding the last chunk) like PyTorch, writes output and input|output pictures, and the
flags of every GAN kind fail with clear messages."""

from __future__ import annotations

import argparse

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from oars_deploy.cli import run
from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures, FolderFailuresError
from oars_deploy.predictors.gan_images.cli import check_gan_args
from oars_deploy.predictors.gan_images.config import image_grid, parse_attrs
from oars_deploy.predictors.gan_images.predictor import GANPredictor
from oars_deploy.records import read_results

PIX2PIX = {"type": "Pix2Pix", "generator": {"type": "UNetGenerator", "ngf": 8, "num_downs": 5}}


@pytest.mark.slow
def test_image_model_predictor_matches_pytorch(tmp_path):
    from gan.apis import run_inference
    from gan.registry import MODELS
    from oars.pipelines.export import export_model

    with DefaultScope.overwrite_default_scope("gan"):
        model = MODELS.build(PIX2PIX)
    model.init_weights()
    model.eval()
    ckpt = tmp_path / "p2p.pth"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    cfg = Config({"default_scope": "gan", "model": PIX2PIX, "export": {"input_shape": [2, 3, 32, 32]}})
    out = tmp_path / "export"
    export_model(cfg, str(ckpt), str(out))
    rng = np.random.default_rng(1)
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(3):  # 3 images, batch-2 graph: the second chunk is padded
        cv2.imwrite(str(folder / f"im{i}.png"), rng.integers(0, 256, (32, 32, 3)).astype(np.uint8))
    (folder / "broken.png").write_bytes(b"not a png")

    predictor = GANPredictor(str(out))
    images = [cv2.imread(str(folder / f"im{i}.png")) for i in range(3)]
    raw = predictor.run_graph({"image": predictor.preprocess(images)})
    rgb = torch.from_numpy(np.stack([im[..., ::-1].transpose(2, 0, 1) for im in images]).copy())
    with torch.no_grad():
        samples = model.predict(model.data_preprocessor({"inputs": {"img_A": list(rgb)}}, False)["inputs"])
    expected = np.stack([s.fake_img.numpy() for s in samples])
    np.testing.assert_allclose(raw, expected, atol=1e-3)

    with pytest.raises(FolderFailuresError, match="1 of 4 images could not be read"):
        run(["--model-dir", str(out), "-i", str(folder), "-o", str(tmp_path / "pred")])
    for i in range(3):
        picture = cv2.imread(str(tmp_path / "pred" / f"im{i}.png"))
        want = np.clip(np.rint(expected[i]), 0, 255).astype(np.uint8).transpose(1, 2, 0)[..., ::-1]
        assert np.abs(picture.astype(int) - want.astype(int)).max() <= 1
        pair = cv2.imread(str(tmp_path / "pred" / f"im{i}_pair.png"))
        # input | output, each 32-px image enlarged 4x (nearest) to the pictures' 128-px minimum
        assert pair.shape == (128, 2 * 128 + 4, 3) and np.array_equal(pair[::4, :128:4], images[i])
    failures = Failures()
    written = run_inference(cfg, str(ckpt), str(folder), str(tmp_path / "infer"), failures=failures)
    assert len(written) == 6 and len(failures) == 1
    for i in range(3):
        a = cv2.imread(str(tmp_path / "infer" / f"im{i}.png")).astype(int)
        assert np.abs(a - cv2.imread(str(tmp_path / "pred" / f"im{i}.png")).astype(int)).max() <= 1
    # results.jsonl: the same gan_images records from tools/infer.py and oars-infer (the unreadable file has none)
    records = read_results(str(tmp_path / "pred"))
    assert records == read_results(str(tmp_path / "infer"))
    assert [(r["predictor"], r["input"], r["images"]) for r in records] == [
        ("gan_images", str(folder / f"im{i}.png"), [f"im{i}.png", f"im{i}_pair.png"]) for i in range(3)]
    with pytest.raises(DeployError, match="give -i"):
        run(["--model-dir", str(out), "-o", str(tmp_path / "x")])
    with pytest.raises(DeployError, match="--attrs / --src-attrs apply to attribute models"):
        run(["--model-dir", str(out), "-i", str(folder), "-o", str(tmp_path / "x"), "--attrs", "Male=1"])


def test_attrs_and_flags_errors():
    names = ["Black_Hair", "Blond_Hair", "Male"]
    np.testing.assert_array_equal(parse_attrs("Black_Hair=1, Male=0", names), [1, 0, 0])
    np.testing.assert_array_equal(parse_attrs("Male=1", names), [0, 0, 1])
    with pytest.raises(DeployError, match="unknown attribute 'Bald'; valid names: Black_Hair, Blond_Hair, Male"):
        parse_attrs("Bald=1", names)
    with pytest.raises(DeployError, match="must be 0 or 1"):
        parse_attrs("Male=2", names)
    with pytest.raises(DeployError, match="NAME=0|1 pairs"):
        parse_attrs("Male", names)

    def ns(**kw):
        base = {"input": None, "attrs": None, "src_attrs": None, "num": None, "label": None, "draw_threshold": None}
        return argparse.Namespace(**{**base, **kw})

    attr_gan = {"kind": "image_attrs", "attr_names": names, "inputs": [{"name": "image"}, {"name": "attrs"}]}
    with pytest.raises(DeployError, match="give --attrs NAME=0|1,... \\(valid names: Black_Hair, Blond_Hair, Male"):
        check_gan_args(ns(input="a.png"), attr_gan)
    with pytest.raises(DeployError, match="--src-attrs applies to STGAN"):
        check_gan_args(ns(input="a.png", attrs="Male=1", src_attrs="Male=0"), attr_gan)
    noise_gan = {"kind": "noise", "z_dim": 4, "inputs": [{"name": "noise"}]}
    with pytest.raises(DeployError, match="it takes no -i"):
        check_gan_args(ns(input="a.png"), noise_gan)
    with pytest.raises(DeployError, match="--label applies to class-conditional"):
        check_gan_args(ns(label=1), noise_gan)
    grid = image_grid([np.full((2, 3, 3), v, np.uint8) for v in (10, 20, 30)], gap=1, min_side=0)
    assert grid.shape == (5, 7, 3) and grid[0, 0, 0] == 10 and grid[0, 4, 0] == 20 and grid[3, 0, 0] == 30
    assert grid[3, 4, 0] == 255  # the empty cell stays white
    assert image_grid([np.full((2, 3, 3), 10, np.uint8)] * 3, gap=1, min_side=4).shape == (9, 13, 3)  # 2x cells
