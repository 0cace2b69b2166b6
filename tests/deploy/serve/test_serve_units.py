"""The parts of ``oars-serve`` that need no running server: a replica's health before and after its model loads,
the token check, request parsing, the options, and the Ray Serve config file (checked by Ray's own schema and
built by the app builder)."""

from __future__ import annotations

import asyncio

import cv2
import numpy as np
import pytest
import urllib3
import yaml
from serve_cases import write_tiny_segmentor

from oars_deploy.errors import DeployError
from oars_deploy.serve.options import ServeOptions
from oars_deploy.serve.requests import RequestError, multipart_file, request_payload, safe_name
from oars_deploy.serve.service import ModelService


def test_health_is_503_until_loaded_and_warmed(tiny_export):
    service = ModelService(ServeOptions(model_dir=tiny_export))
    assert service.health() == (503, {"status": "loading"})
    with pytest.raises(RequestError) as info:
        service.check_ready()
    assert info.value.status == 503 and info.value.headers == {"Retry-After": "1"}
    service.start().join(timeout=60)
    assert service.health() == (200, {"status": "ok", "predictor": "semantic_labels"})
    img = cv2.imencode(".png", np.full((9, 7, 3), 200, np.uint8))[1].tobytes()
    record = service.predict([service.decode(img, "image/png", "../x/a.png")])[0]
    assert record["input"] == "a.png" and record["image_size"] == [9, 7]


def test_failed_load_says_why(tmp_path):
    folder = write_tiny_segmentor(str(tmp_path / "m"))
    (tmp_path / "m" / "model.onnx").write_bytes(b"not an onnx file")
    service = ModelService(ServeOptions(model_dir=folder), load_now=True)
    status, body = service.health()
    assert status == 503 and body["status"] == "failed" and body["error"]


def test_token_check(tmp_path, tiny_export):
    (tmp_path / "t").write_text("abc\n")
    service = ModelService(ServeOptions(model_dir=tiny_export, token_file=str(tmp_path / "t")))
    service.check_auth("Bearer abc")
    for header in (None, "Bearer abd", "Basic abc", "abc"):
        with pytest.raises(RequestError) as info:
            service.check_auth(header)
        assert info.value.status == 401 and "abc" not in info.value.message
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(DeployError, match="first line is empty"):
        ModelService(ServeOptions(model_dir=tiny_export, token_file=str(tmp_path / "empty")))


def test_body_limit_while_reading(tiny_export):
    service = ModelService(ServeOptions(model_dir=tiny_export, max_body_mb=1 / 1024))  # 1 KiB

    async def chunks():
        for _ in range(3):
            yield b"x" * 600

    with pytest.raises(RequestError, match="exceeds the server's limit") as info:
        asyncio.run(service.read_body(None, chunks()))  # no Content-Length: counted while reading
    assert info.value.status == 413
    with pytest.raises(RequestError):
        asyncio.run(service.read_body("5000", chunks()))


def test_multipart_and_names():
    data = b"\r\n\x89PNG\r\n--not-the-boundary\r\n"
    body, content_type = urllib3.encode_multipart_formdata({"note": "hi", "file": ("C:\\a\\b\\c.png", data)})
    assert multipart_file(body, content_type) == (data, "C:\\a\\b\\c.png")
    assert request_payload(body, content_type, ("image/",), None) == (data, "c.png")
    assert safe_name("../../etc/passwd") == "passwd" and safe_name("..") == "request" and safe_name(None) == "request"
    with pytest.raises(RequestError, match="without a boundary"):
        multipart_file(body, "multipart/form-data")


def test_options_from_dict_errors(tiny_export):
    assert ServeOptions.from_dict({"model_dir": tiny_export, "max_batch": "4"}).max_batch == 4
    with pytest.raises(DeployError, match="unknown key 'max_bach'; did you mean 'max_batch'"):
        ServeOptions.from_dict({"model_dir": tiny_export, "max_bach": 4})
    with pytest.raises(DeployError, match="max_queue = 1.5; expected int"):
        ServeOptions.from_dict({"model_dir": tiny_export, "max_queue": 1.5})
    with pytest.raises(DeployError, match="option replicas: got 0"):
        ServeOptions(model_dir=tiny_export, replicas=0)
    with pytest.raises(DeployError, match="model_dir"):
        ServeOptions.from_dict({})


def test_write_config_is_a_valid_serve_config_that_builds(tmp_path, tiny_export):
    pytest.importorskip("ray.serve")
    from ray.serve.schema import ServeDeploySchema

    from oars_deploy.serve.app import IMPORT_PATH, build_app
    from oars_deploy.serve.cli import run as serve_main

    (tmp_path / "token").write_text("abc\n")
    path = tmp_path / "serve.yaml"
    serve_main(["--model-dir", tiny_export, "--port", "8123", "--replicas", "2", "--max-queue", "7",
                "--token-file", str(tmp_path / "token"), "--write-config", str(path)])
    config = yaml.safe_load(path.read_text())
    schema = ServeDeploySchema.parse_obj(config)  # what `serve deploy` checks
    assert schema.http_options.host == "127.0.0.1" and schema.http_options.port == 8123
    app = config["applications"][0]
    assert app["import_path"] == IMPORT_PATH and "abc" not in path.read_text()  # the token's file, not the token
    deployment = build_app(app["args"])._bound_deployment  # what `serve run` builds from the file
    assert deployment.num_replicas == 2 and deployment.max_queued_requests == 7
    with pytest.raises(DeployError, match="exists already"):
        serve_main(["--model-dir", tiny_export, "--write-config", str(path)])


def test_static_batch_export_is_served_one_by_one(tmp_path, capsys):
    pytest.importorskip("ray.serve")
    from oars_deploy.serve.app import build_app
    from oars_deploy.serve.cli import run as serve_main

    folder = write_tiny_segmentor(str(tmp_path / "static"), batch=2)
    serve_main(["--model-dir", folder, "--max-batch", "8", "--write-config", str(tmp_path / "s.yaml")])
    assert "static batch of 2: requests are served one per model call" in capsys.readouterr().out
    args = yaml.safe_load((tmp_path / "s.yaml").read_text())["applications"][0]["args"]
    assert build_app(args)._bound_deployment.init_args[0]["max_batch"] == 1


def test_detection_records_equal_oars_infer(tmp_path):
    from serve_cases import write_images, write_tiny_detector

    from oars_deploy.cli import run as infer_main
    from oars_deploy.records import read_results

    folder = write_tiny_detector(str(tmp_path / "det"))
    paths = write_images(str(tmp_path / "imgs"), [(40, 64), (17, 23)], seed=7)
    infer_main(["--model-dir", folder, "-i", str(tmp_path / "imgs"), "-o", str(tmp_path / "out")])
    expected = read_results(str(tmp_path / "out"))
    service = ModelService(ServeOptions(model_dir=folder), load_now=True)
    items = [service.decode(open(p, "rb").read(), "image/png", p) for p in paths]
    got = service.predict(items)  # one batch of both, as @serve.batch hands them over
    assert [r["detections"] for r in expected] != [[], []]
    assert got == [{**r, "input": r["input"].rsplit("/", 1)[-1]} for r in expected]


def test_clip_records_equal_oars_infer(tmp_path):
    pytest.importorskip("av")
    from serve_cases import write_tiny_clip_classifier, write_video

    from oars_deploy.cli import run as infer_main
    from oars_deploy.records import read_results

    folder = write_tiny_clip_classifier(str(tmp_path / "clip"))
    (tmp_path / "videos").mkdir()
    paths = [write_video(str(tmp_path / "videos" / f"v{i}.mp4"), c) for i, c in enumerate([(200, 30, 30),
                                                                                            (20, 180, 40)])]
    infer_main(["--model-dir", folder, "-i", str(tmp_path / "videos"), "-o", str(tmp_path / "out")])
    expected = read_results(str(tmp_path / "out"))
    service = ModelService(ServeOptions(model_dir=folder), load_now=True)
    assert service.health()[0] == 200
    items = [service.decode(open(p, "rb").read(), "video/mp4", p) for p in paths]
    got = service.predict(items)
    assert expected[0]["label"] != expected[1]["label"]  # the records follow the videos
    assert got == [{**r, "input": r["input"].rsplit("/", 1)[-1]} for r in expected]
    with pytest.raises(RequestError) as info:  # a picture posted to a video model: 400, no server path named
        service.decode(cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))[1].tobytes(), "video/mp4", "a.mp4")
    assert info.value.status == 400 and "oars-serve-" not in info.value.message


def test_port_that_cannot_be_listened_on_is_refused_before_ray_starts(tiny_export, capsys):
    """A held port, Ray's own fixed port and a number outside 1..65535: one message each, exit 2, no Ray."""
    import socket

    from oars_deploy.serve.cli import main as serve_cli

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        cases = {held: f"cannot listen on 127.0.0.1:{held}", 52365: "Ray's dashboard agent", 70000: "1..65535"}
        for port, expected in cases.items():
            with pytest.raises(SystemExit) as exit_info:
                serve_cli(["--model-dir", tiny_export, "--port", str(port)])
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert expected in err and "Traceback" not in err, err
    import sys

    assert "ray" not in sys.modules or not __import__("ray").is_initialized()
