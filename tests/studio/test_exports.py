"""The Exports room through its routes: an export's page (files, parity), "try it" on an uploaded image giving the
very record ``oars-infer`` writes for that file, each refusal (upload limit, bytes that do not decode, kinds of file
the studio does not take, names and paths that would leave their folders, formats and precisions it does not write,
oars-serve without the serve extra); and (slow) a real export of a tiny trained run and oars-serve started and
stopped for it."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from tiny_exports import tiny_segmentor_dir

from oars.studio.background import wait_for
from oars_deploy.cli import run as oars_infer
from tests.studio.conftest import csrf_headers
from tests.studio.tiny_run import tiny_trained_run

JSON = {"Accept": "application/json"}


def _png(h: int = 48, w: int = 64) -> bytes:
    img = np.zeros((h, w, 3), np.uint8)
    cv2.circle(img, (w // 2, h // 2), min(h, w) // 3, (0, 200, 255), -1)
    return cv2.imencode(".png", img)[1].tobytes()


@pytest.fixture
def export_client(make_client):
    client = make_client(max_upload_bytes=100_000)
    tiny_segmentor_dir(str(client.app.state.workspace.exports_dir / "tiny"), -1)
    return client


def _try(client, name: str, data: bytes, filename: str = "shape.png"):
    return client.post(f"/exports/{name}/try", files={"file": (filename, data, "application/octet-stream")},
                       headers={**csrf_headers(client), **JSON})


def test_export_page_and_listing(export_client):
    page = export_client.get("/exports/tiny").text
    assert "semantic_labels" in page and "model.onnx" in page and "deploy.yaml" in page
    assert "ONNX self-check passed" in page and "Try it" in page and "Not serving" in page
    assert '<a href="/exports/tiny">tiny</a>' in export_client.get("/exports").text


def test_try_it_gives_the_record_oars_infer_writes(export_client, tmp_path):
    result = _try(export_client, "tiny", _png())
    assert result.status_code == 200, result.text
    tried = result.json()
    assert len(tried["records"]) == 1 and tried["pictures"] == ["shape_vis.png"]
    upload = export_client.app.state.workspace.uploads_dir / tried["id"] / "shape.png"
    oars_infer(["--model-dir", str(export_client.app.state.workspace.exports_dir / "tiny"), "-i", str(upload),
                "-o", str(tmp_path / "cli")])
    cli_records = [json.loads(line) for line in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    assert tried["records"] == cli_records
    page = export_client.get(f"/exports/tiny?try_id={tried['id']}").text
    assert f"/exports/tiny/try/{tried['id']}/shape_vis.png" in page and '"predictor": "semantic_labels"' in page
    picture = export_client.get(f"/exports/tiny/try/{tried['id']}/shape_vis.png")
    assert picture.status_code == 200 and cv2.imdecode(np.frombuffer(picture.content, np.uint8), 1) is not None
    # a page form posts without Accept: JSON -> the export's page with the result
    form = export_client.post("/exports/tiny/try", files={"file": ("x.png", _png(), "image/png")},
                              headers=csrf_headers(export_client))
    assert form.status_code == 303 and form.headers["location"].startswith("/exports/tiny?try_id=")


def test_a_model_without_input_generates(export_client, tmp_path):
    from tests.deploy.serve.test_serve_gan import noise_export

    exports = export_client.app.state.workspace.exports_dir
    noise_export(str(exports / "noise"))
    page = export_client.get("/exports/noise").text
    assert "reads no input" in page and "Generate" in page and 'type="file"' not in page
    tried = export_client.post("/exports/noise/try", headers={**csrf_headers(export_client), **JSON}).json()
    assert tried["records"] and tried["pictures"] and tried["input"] is None
    oars_infer(["--model-dir", str(exports / "noise"), "-o", str(tmp_path / "cli")])
    expected = [json.loads(line) for line in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    assert tried["records"] == expected
    # an image model without a file is refused
    assert "empty" in export_client.post("/exports/tiny/try", headers={**csrf_headers(export_client), **JSON}) \
        .json()["error"]


def test_upload_refusals(export_client):
    big = _try(export_client, "tiny", b"\x89PNG" + b"0" * 200_000)
    assert big.status_code == 413 and "over this studio's upload limit of 100000 bytes" in big.json()["error"]
    just_over = _try(export_client, "tiny", b"0" * 100_001)
    assert just_over.status_code == 413 and "100001 bytes" in just_over.json()["error"]
    garbage = _try(export_client, "tiny", b"this is not an image")
    assert garbage.status_code == 400 and "could not decode the body as an image" in garbage.json()["error"]
    truncated = _try(export_client, "tiny", _png()[:60])
    assert truncated.status_code == 400 and "shape.png" in truncated.json()["error"]
    pickle = _try(export_client, "tiny", b"\x80\x04K\x01.", "features.pkl")
    assert pickle.status_code == 400 and "expected an image" in pickle.json()["error"]
    video = _try(export_client, "tiny", b"not a video", "clip.mp4")
    assert video.status_code == 400 and "clip.mp4" in video.json()["error"]
    empty = _try(export_client, "tiny", b"")
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    assert _try(export_client, "nope", _png()).status_code == 404
    no_csrf = export_client.post("/exports/tiny/try", files={"file": ("x.png", _png(), "image/png")})
    assert no_csrf.status_code == 403
    assert list(export_client.app.state.workspace.uploads_dir.iterdir()) == []  # nothing refused was kept


def test_paths_and_names_stay_inside(export_client, tmp_path):
    ws = export_client.app.state.workspace
    (ws.root / "secret.txt").write_text("x")
    for name in ("%2E%2E", "..%2Fsecret.txt", "%2E%2E%2F%2E%2E%2Fruns", ".hidden", "a%20b"):
        assert export_client.get(f"/exports/{name}", headers=JSON).status_code in (400, 404), name
    tried = _try(export_client, "tiny", _png()).json()
    for filename in ("shape.png", "results.jsonl", "..%2F..%2Fsecret.txt", "nope.png"):
        assert export_client.get(f"/exports/tiny/try/{tried['id']}/{filename}").status_code == 404, filename
    assert export_client.get("/exports/tiny/try/..%2F..%2Fexports/shape_vis.png").status_code in (400, 404)


def test_export_form_refusals(make_client, tmp_path):
    client = make_client()
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("default_scope: x\n")
    (run / "epoch_1.pth").write_bytes(b"w")
    run_id = client.app.state.workspace.register_run(run)
    form = client.get(f"/runs/{run_id}/export").text
    assert '<option selected>onnx</option>' in form and "<option>int8</option>" in form

    def post(**fields):
        data = {"checkpoint": "epoch_1", "fmt": "onnx", "precision": "fp32", "name": "e", **fields}
        return client.post(f"/runs/{run_id}/export", data=data, headers={**csrf_headers(client), **JSON})

    assert "format 'tflite-ish': expected one of onnx" in post(fmt="tflite-ish").json()["error"]
    assert "precision 'int4'" in post(precision="int4").json()["error"]
    assert "give a calibration folder" in post(precision="int8").json()["error"]
    outside = tmp_path / "calib"
    outside.mkdir()
    for calib in ("../../calib", str(outside)):
        refused = post(precision="int8", calib_dir=calib)
        assert refused.status_code == 403 and "outside the workspace" in refused.json()["error"]
    for name in ("../evil", "/abs", ".x", "a/b"):
        assert "export name" in post(name=name).json()["error"], name
    assert "checkpoint '../epoch_1'" in post(checkpoint="../epoch_1").json()["error"]
    tiny_segmentor_dir(str(client.app.state.workspace.exports_dir / "taken"), -1)
    assert "already exists" in post(name="taken").json()["error"]
    assert not (client.app.state.workspace.exports_dir / "e").exists()


def test_serve_refusals(export_client, monkeypatch):
    import oars_deploy.extras

    stop = export_client.post("/exports/tiny/serve/stop", headers={**csrf_headers(export_client), **JSON})
    assert stop.status_code == 400 and "no oars-serve runs for it" in stop.json()["error"]
    bad_port = export_client.post("/exports/tiny/serve/start", data={"port": "80"},
                                  headers={**csrf_headers(export_client), **JSON})
    assert "port 80: expected 1024-65535" in bad_port.json()["error"]
    real = oars_deploy.extras.is_installed
    monkeypatch.setattr(oars_deploy.extras, "is_installed", lambda name: name != "ray" and real(name))
    missing = export_client.post("/exports/tiny/serve/start", data={"port": "8123"},
                                 headers={**csrf_headers(export_client), **JSON})
    assert missing.status_code == 400 and "needs ray" in missing.json()["error"] and "pip install" in \
        missing.json()["error"]
    assert "Not serving" in export_client.get("/exports/tiny/serve").text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_export_a_trained_run_then_try_it(client, demo_data, tmp_path_factory):
    run = tiny_trained_run(tmp_path_factory.getbasetemp(), demo_data)
    run_id = client.app.state.workspace.register_run(run)
    started = client.post(f"/runs/{run_id}/export", data={"checkpoint": "epoch_1", "fmt": "onnx",
                                                          "precision": "fp32", "name": "unet"},
                          headers=csrf_headers(client))
    assert started.status_code == 303 and started.headers["location"] == "/exports/unet"
    status = wait_for(client.app.state.workspace.exports_dir / "unet", timeout=300)
    assert status["state"] == "finished", status
    page = client.get("/exports/unet").text
    assert "model.onnx" in page and "semantic_labels" in page
    image = (Path(demo_data) / "images" / "val" / "0000.png").read_bytes()
    tried = client.post("/exports/unet/try", files={"file": ("0000.png", image, "image/png")},
                        headers={**csrf_headers(client), **JSON}).json()
    assert tried["records"][0]["predictor"] == "semantic_labels" and tried["pictures"] == ["0000_vis.png"]
    # an edge format: its parity line from deploy.yaml, and "try it" runs its own files (oars-infer --backend ort)
    client.post(f"/runs/{run_id}/export", data={"checkpoint": "epoch_1", "fmt": "ort", "precision": "fp32",
                                               "name": "unet-ort"}, headers=csrf_headers(client))
    status = wait_for(client.app.state.workspace.exports_dir / "unet-ort", timeout=400)
    assert status["state"] == "finished", status
    page = client.get("/exports/unet-ort").text
    assert "ort FP32 vs ONNX Runtime: max abs diff" in page and "oars-infer --backend ort" in page
    assert "ort FP32 vs ONNX Runtime" in client.get("/exports").text
    tried_ort = client.post("/exports/unet-ort/try", files={"file": ("0000.png", image, "image/png")},
                            headers={**csrf_headers(client), **JSON}).json()
    assert tried_ort["records"][0]["classes"] == tried["records"][0]["classes"]


@pytest.mark.slow
def test_serve_starts_and_stops(export_client):
    pytest.importorskip("ray", reason="oars-serve needs the serve extra")
    port = _free_port()
    started = export_client.post("/exports/tiny/serve/start", data={"port": str(port)},
                                 headers=csrf_headers(export_client))
    assert started.status_code == 303
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            state = export_client.get("/exports/tiny/serve").text
            if "Health: <span class=\"ok\">" in state:
                break
            time.sleep(2)
        assert f"http://127.0.0.1:{port}" in state and "Health: <span class=\"ok\">" in state, state
        again = export_client.post("/exports/tiny/serve/start", data={"port": str(port)},
                                   headers={**csrf_headers(export_client), **JSON})
        assert "already runs" in again.json()["error"]
    finally:
        stopped = export_client.post("/exports/tiny/serve/stop", headers=csrf_headers(export_client))
    assert stopped.status_code == 303 and "Not serving" in export_client.get("/exports/tiny/serve").text
