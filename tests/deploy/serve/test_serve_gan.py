"""GAN generators behind oars-serve (driven through ModelService, the replica's logic without the HTTP layer): the
served record is oars-infer's record for the same sample or image, and its png_base64 pictures are oars-infer's
files byte for byte decoded; bad requests get one clear 4xx. Tiny hand-built ONNX generators (no torch)."""

from __future__ import annotations

import argparse
import base64
import json
import os.path as osp

import cv2
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tiny_exports import save_model_folder

from oars_deploy.predictors.gan_images.cli import run_gan
from oars_deploy.serve.models import load_served
from oars_deploy.serve.options import ServeOptions
from oars_deploy.serve.requests import RequestError
from oars_deploy.serve.service import ModelService

Z, SIDE, CLASSES = 4, 8, ["zero", "one", "two"]
ATTRS = ["Smile", "Hat"]


def _gan_deploy(name: str, gan: dict, inputs: list[dict], image_steps: bool) -> dict:
    first = inputs[0]
    steps = [{"type": "Resize", "size": [SIDE, SIDE], "keep_ratio": False, "interpolation": "linear"},
             {"type": "Normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_rgb": True},
             {"type": "Permute"}] if image_steps else []
    return {"version": 1, "predictor": "gan_images", "model": {"name": name, "task": "gan", "onnx": "model.onnx"},
            "labels": gan.get("class_names") or gan.get("attr_names") or ["image"],
            "input": {"name": first["name"], "shape": first["shape"], "dtype": first["dtype"],
                      "layout": "NCHW" if image_steps else "NC", "color": "RGB" if image_steps else "none"},
            "preprocess": steps, "outputs": [{"name": "fake", "shape": [-1, 3, SIDE, SIDE], "dtype": "float32"}],
            "postprocess": {"type": "gan_image", "range": [0, 255], "color": "RGB", "layout": "NCHW"},
            "gan": {**gan, "inputs": inputs, "output_size": [SIDE, SIDE]}}


def noise_export(folder: str) -> str:
    """A class-conditional 'generator': fake = 128 + 40 * reshape(noise @ W + E[label])."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(Z, 3 * SIDE * SIDE)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=(len(CLASSES), 3 * SIDE * SIDE)).astype(np.float32), "e"),
             numpy_helper.from_array(np.array([-1, 3, SIDE, SIDE], np.int64), "shape"),
             numpy_helper.from_array(np.array(40.0, np.float32), "k"),
             numpy_helper.from_array(np.array(128.0, np.float32), "c")]
    nodes = [helper.make_node("MatMul", ["noise", "w"], ["h"]), helper.make_node("Gather", ["e", "label"], ["emb"]),
             helper.make_node("Add", ["h", "emb"], ["s"]), helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("Mul", ["r", "k"], ["m"]), helper.make_node("Add", ["m", "c"], ["fake"])]
    graph = helper.make_graph(nodes, "tinycgan", [
        helper.make_tensor_value_info("noise", TensorProto.FLOAT, ["batch", Z]),
        helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("fake", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE])], inits)
    inputs = [{"name": "noise", "shape": [-1, Z], "dtype": "float32"}, {"name": "label", "shape": [-1],
                                                                        "dtype": "int64"}]
    gan = {"kind": "noise", "z_dim": Z, "num_classes": len(CLASSES), "class_names": CLASSES}
    save_model_folder(folder, graph, _gan_deploy("TinyCGAN", gan, inputs, False))
    return folder


def attrs_export(folder: str) -> str:
    """An attribute 'editor': fake = 255 - image + 50 * attrs[:, 0] (per sample, broadcast over pixels)."""
    inits = [numpy_helper.from_array(np.array(255.0, np.float32), "full"),
             numpy_helper.from_array(np.array([[50.0], [0.0]], np.float32), "w"),
             numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "shape")]
    nodes = [helper.make_node("Sub", ["full", "image"], ["inv"]), helper.make_node("MatMul", ["attrs", "w"], ["a"]),
             helper.make_node("Reshape", ["a", "shape"], ["a4"]), helper.make_node("Add", ["inv", "a4"], ["fake"])]
    graph = helper.make_graph(nodes, "tinyattr", [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE]),
        helper.make_tensor_value_info("attrs", TensorProto.FLOAT, ["batch", len(ATTRS)])],
        [helper.make_tensor_value_info("fake", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE])], inits)
    inputs = [{"name": "image", "shape": [-1, 3, SIDE, SIDE], "dtype": "float32"},
              {"name": "attrs", "shape": [-1, len(ATTRS)], "dtype": "float32"}]
    gan = {"kind": "image_attrs", "input_size": [SIDE, SIDE], "attr_names": ATTRS}
    save_model_folder(folder, graph, _gan_deploy("TinyAttr", gan, inputs, True))
    return folder


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("gan_exports")
    return {"noise": noise_export(str(root / "noise")), "attrs": attrs_export(str(root / "attrs"))}


def service(model_dir: str) -> ModelService:
    return ModelService(ServeOptions.from_dict({"model_dir": model_dir}), load_now=True)


def infer_args(model_dir: str, out: str, **kw) -> argparse.Namespace:
    base = dict(model_dir=model_dir, output_dir=out, device="cpu", backend="onnxruntime", input=None, num=None,
                seed=0, label=None, attrs=None, src_attrs=None, batch_size=None, draw_threshold=None)
    return argparse.Namespace(**{**base, **kw})


def decoded(b64: str) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)


def multipart(fields: dict[str, tuple[bytes, str | None]]) -> tuple[bytes, str]:
    parts = []
    for name, (data, filename) in fields.items():
        extra = f'; filename="{filename}"' if filename else ""
        parts.append(f'--B\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode() + data + b"\r\n")
    return b"".join(parts) + b"--B--\r\n", "multipart/form-data; boundary=B"


def test_noise_samples_equal_oars_infer(exports, tmp_path):
    """Sample I of seed S (batched with others in one call) is oars-infer --seed S's sample I: record and pixels."""
    results: list = []
    run_gan(infer_args(exports["noise"], str(tmp_path), seed=7, num=5), results=results)
    srv = service(exports["noise"])
    asks = [{"seed": 7, "index": 4}, {"seed": 7, "index": 1}, {"seed": 7, "index": 2, "label": 2}]
    items = [srv.decode(json.dumps(a).encode(), "application/json", None) for a in asks]
    served = srv.predict(items)
    for ask, got in zip(asks, served):
        pictures = got.pop("png_base64")
        if "label" not in ask:
            assert got == results[ask["index"]].to_json()
        else:  # an explicit label: the same noise row, another class
            assert got["label"] == 2 and got["class"] == "two" and got["index"] == 2
        name = got["images"][0]
        assert list(pictures) == [name] == [f"sample_{ask['index']:03d}.png"]
        if "label" not in ask:
            assert np.array_equal(decoded(pictures[name]), cv2.imread(osp.join(tmp_path, name)))
    assert srv.model.summary()["accepts"] == ["application/json"]


def test_attribute_edit_equals_oars_infer(exports, tmp_path):
    """An image + attrs as multipart: oars-infer -i IMG --attrs's record and both pictures."""
    img = np.random.default_rng(1).integers(0, 256, (20, 12, 3), dtype=np.uint8)
    path = str(tmp_path / "face.png")
    cv2.imwrite(path, img)
    results: list = []
    run_gan(infer_args(exports["attrs"], str(tmp_path / "out"), input=path, attrs="Smile=1"), results=results)
    srv = service(exports["attrs"])
    body, ctype = multipart({"file": (open(path, "rb").read(), "face.png"), "attrs": (b"Smile=1", None)})
    got = srv.predict([srv.decode(body, ctype, None)])[0]
    pictures = got.pop("png_base64")
    want = results[0].to_json()
    assert got == {**want, "input": "face.png"} and got["attrs"] == {"Smile": 1.0, "Hat": 0.0}
    for name in ("face.png", "face_pair.png"):
        assert np.array_equal(decoded(pictures[name]), cv2.imread(str(tmp_path / "out" / name)))


@pytest.mark.parametrize("kind, body, ctype, status, words", [
    ("noise", b"\x89PNG", "image/png", 415, "send application/json"),
    ("noise", b"{bad", "application/json", 400, "not valid JSON"),
    ("noise", b'{"seed": 1, "num": 3}', "application/json", 400, "unknown field(s) num"),
    ("noise", b'{"index": 5000}', "application/json", 400, "'index': 5000 is outside [0, 4095]"),
    ("noise", b'{"label": 3}', "application/json", 400, "'label': 3 is outside [0, 2]"),
    ("noise", b'{"seed": "x"}', "application/json", 400, "'seed': expected an integer"),
    ("attrs", b"\x89PNG", "image/png", 415, "multipart/form-data"),
    ("attrs", None, "attrs-missing", 400, "missing the text field 'attrs'"),
    ("attrs", None, "attrs-unknown", 400, "attrs: unknown attribute 'Beard'"),
])
def test_bad_gan_requests_get_one_clear_4xx(exports, kind, body, ctype, status, words):
    srv = service(exports[kind])
    if body is None:
        png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes()
        fields = {"file": (png, "a.png")}
        if ctype == "attrs-unknown":
            fields["attrs"] = (b"Beard=1", None)
        body, ctype = multipart(fields)
    with pytest.raises(RequestError) as err:
        srv.decode(body, ctype, None)
    assert err.value.status == status and words in err.value.message, err.value.message


def test_generators_are_not_run_by_ray_batch_inference(exports):
    assert load_served(exports["noise"]).batch_inference is False


def test_oars_serve_accepts_generator_folders_before_ray_starts(exports):
    """The CLI's check (run before Ray starts) takes a generator export: dynamic batch."""
    from oars_deploy.serve.cli import check_model_dir

    assert check_model_dir(ServeOptions.from_dict({"model_dir": exports["attrs"]})) is None
