"""``oars-serve`` over HTTP (one server for the session, see conftest.py): the records equal ``oars-infer``'s,
the routes, the token, the limits, bad requests, overload, loopback-only sockets, and ``oars-infer --ray`` joining
the same Ray instance (a folder with a corrupt file, then resumed)."""

from __future__ import annotations

import json
import os.path as osp
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest
import urllib3
from serve_cases import TOKEN, write_images

from oars_deploy.cli import run as infer_main
from oars_deploy.errors import UserError
from oars_deploy.records import read_results

LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


def png(img: np.ndarray) -> bytes:
    """PNG bytes of a BGR image."""
    return cv2.imencode(".png", img)[1].tobytes()


def error_of(body: bytes) -> str:
    """The ``error`` message of a JSON error body."""
    return json.loads(body)["error"]


def test_health_and_model(server):
    status, _, body = server.request("GET", "/health", token=None)
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, _, body = server.request("GET", "/model")
    info = json.loads(body)
    assert status == 200
    assert info["predictor"] == "semantic_labels" and info["labels"] == ["a", "b", "c", "d"]
    assert info["batch"] == "dynamic" and info["server"]["max_batch"] == 4
    assert server.model_dir not in body.decode()  # no server path in the answer


def test_predict_equals_oars_infer_record(server, tmp_path):
    paths = write_images(str(tmp_path / "imgs"), [(40, 64), (32, 32), (50, 20)], seed=3)
    infer_main(["--model-dir", server.model_dir, "-i", str(tmp_path / "imgs"), "-o", str(tmp_path / "out")])
    expected = {osp.basename(r["input"]): r for r in read_results(str(tmp_path / "out"))}
    assert len(expected) == 3
    for path in paths:
        name = osp.basename(path)
        with open(path, "rb") as f:
            data = f.read()
        want = {**expected[name], "input": name}
        status, _, body = server.request("POST", "/predict", data, {"Content-Type": "image/png", "X-Filename": name})
        assert status == 200, body
        assert json.loads(body) == want
        form, content_type = urllib3.encode_multipart_formdata({"file": (f"/etc/{name}", data, "image/png")})
        status, _, body = server.request("POST", "/predict", form, {"Content-Type": content_type})
        assert status == 200, body
        assert json.loads(body) == want  # the file name's folder is dropped: a label, never a server path


def test_token_missing_wrong_right(server):
    data = png(np.zeros((8, 8, 3), np.uint8))
    headers = {"Content-Type": "image/png"}
    for token, want in [(None, "missing"), ("wrong-token", "wrong")]:
        status, got_headers, body = server.request("POST", "/predict", data, headers, token=token)
        assert status == 401 and error_of(body).startswith(want)
        assert got_headers.get("www-authenticate", got_headers.get("WWW-Authenticate")) == "Bearer"
        assert server.request("GET", "/metrics", token=token)[0] == 401
        assert server.request("GET", "/model", token=token)[0] == 401
    assert server.request("POST", "/predict", data, headers)[0] == 200
    assert TOKEN not in open(server.log).read()


@pytest.mark.parametrize("case", ["body_too_large", "too_many_pixels", "not_an_image", "truncated",
                                  "wrong_content_type", "missing_field", "empty_body"])
def test_bad_requests_get_one_clear_4xx(server, case):
    rng = np.random.default_rng(0)
    good = png(rng.integers(0, 256, (30, 30, 3), dtype=np.uint8))
    headers = {"Content-Type": "image/png"}
    body, want, words = {
        "body_too_large": (b"\0" * 300_000, 413, "exceeds the server's limit of 0.25 MiB"),
        "too_many_pixels": (png(np.zeros((300, 300, 3), np.uint8)), 413, "90000 pixels exceeds"),
        "not_an_image": (b"this is text, not a picture" * 10, 400, "could not decode the body as an image"),
        "truncated": (good[:len(good) // 2], 400, "could not decode the body as an image"),
        "wrong_content_type": (good, 415, "unsupported Content-Type 'text/plain'"),
        "missing_field": (None, 400, "no field 'file' (fields: image)"),
        "empty_body": (b"", 400, "empty input"),
    }[case]
    if case == "wrong_content_type":
        headers = {"Content-Type": "text/plain"}
    if case == "missing_field":
        body, content_type = urllib3.encode_multipart_formdata({"image": ("a.png", good, "image/png")})
        headers = {"Content-Type": content_type}
    status, _, answer = server.request("POST", "/predict", body, headers)
    assert status == want, answer
    assert words in error_of(answer)
    assert server.request("POST", "/predict", good, {"Content-Type": "image/png"})[0] == 200  # still serving


def test_overload_gets_503_with_retry_after(server):
    data = png(np.random.default_rng(1).integers(0, 256, (190, 190, 3), dtype=np.uint8))

    def post(_):
        status, headers, _ = server.request("POST", "/predict", data, {"Content-Type": "image/png"})
        return status, {k.lower(): v for k, v in headers.items()}

    with ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(post, range(96)))
    statuses = [s for s, _ in answers]
    assert set(statuses) <= {200, 503}, statuses
    assert 503 in statuses and 200 in statuses, statuses
    assert all(h.get("retry-after") == "1" for s, h in answers if s == 503)
    assert server.request("POST", "/predict", data, {"Content-Type": "image/png"})[0] == 200  # recovers


def test_metrics_count_outcomes(server):
    server.request("POST", "/predict", b"x", {"Content-Type": "image/png"}, token=None)  # a 401
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # replicas report to the metrics actor asynchronously
        status, headers, body = server.request("GET", "/metrics")
        text = body.decode()
        counts = dict(re.findall(r'oars_serve_requests_total\{outcome="(\d+)"\} (\d+)', text))
        if "401" in counts and "200" in counts:
            break
        time.sleep(0.2)
    assert status == 200 and headers.get("content-type", headers.get("Content-Type")).startswith("text/plain")
    assert int(counts["200"]) >= 1 and int(counts["401"]) >= 1
    assert f'oars_serve_request_seconds_count{{outcome="200"}} {counts["200"]}' in text
    assert "oars_serve_model_ready 1" in text


def test_sockets_listen_on_loopback_only(server):
    pytest.importorskip("ray")  # Ray ships psutil (ray/thirdparty_files), on the path once ray is imported
    psutil = pytest.importorskip("psutil")
    root = psutil.Process(server.proc.pid)
    pids = {root.pid} | {p.pid for p in root.children(recursive=True)}
    listening = [c for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening, "no listening socket found for the server's processes"
    assert any(c.laddr.port == int(server.url.rsplit(":", 1)[1]) for c in listening)
    outside = [(c.laddr.ip, c.laddr.port) for c in listening if c.laddr.ip not in LOOPBACK]
    assert not outside, f"sockets listening beyond loopback: {outside}"


def test_ray_data_folder_with_a_corrupt_file_then_resumed(server, tmp_path):
    folder = tmp_path / "imgs"
    write_images(str(folder), [(20, 30), (33, 17), (16, 16)], seed=5)
    (folder / "corrupt.png").write_bytes(b"not a png at all")
    out = tmp_path / "out"
    address = re.search(r"Ray address (\S+)", open(server.log).read()).group(1)
    cmd = [sys.executable, "-m", "oars_deploy.cli", "--model-dir", server.model_dir, "-i", str(folder), "-o",
           str(out), "--ray", "--ray-address", address, "--num-workers", "1", "--worker-cpus", "0.5",
           "--batch-size", "2"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert first.returncode == 2, first.stderr[-2000:]
    assert "corrupt.png: could not read image (unsupported or corrupt file)" in first.stderr
    records = read_results(str(out))
    assert sorted(osp.basename(r["input"]) for r in records) == ["img0.png", "img1.png", "img2.png"]
    infer_main(["--model-dir", server.model_dir, "-i", str(folder / "img1.png"), "-o", str(tmp_path / "one")])
    ray_only = ("resolved_input",)  # --ray's resume key (the input's real path), not in a plain run's records
    assert ([{k: v for k, v in r.items() if k not in ray_only} for r in records if r["input"].endswith("img1.png")]
            == read_results(str(tmp_path / "one")))
    # a killed run's cut last line is dropped; the file it named is predicted again, nothing twice
    lines = open(out / "results.jsonl").read().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    (folder / "corrupt.png").unlink()
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "2 done before, skipped" in second.stdout
    names = [osp.basename(r["input"]) for r in read_results(str(out))]
    assert sorted(names) == ["img0.png", "img1.png", "img2.png"]


def test_ray_data_refuses_bad_worker_count(tiny_export, tmp_path):
    write_images(str(tmp_path / "imgs"), [(8, 8)])
    with pytest.raises(UserError, match="--num-workers must be >= 1, got 0"):
        infer_main(["--model-dir", tiny_export, "-i", str(tmp_path / "imgs"), "-o", str(tmp_path / "o"), "--ray",
                    "--num-workers", "0"])


@pytest.mark.slow
def test_killed_replica_is_replaced_and_requests_succeed(server):
    """Last in the module: it kills the session server's replica. Ray Serve starts another one and retries the
    request on it (about 12 s on 2 busy cores)."""
    pytest.importorskip("ray")
    psutil = pytest.importorskip("psutil")
    replicas = [p for p in psutil.Process(server.proc.pid).children(recursive=True)
                if "ServeReplica" in " ".join(p.cmdline())]
    assert len(replicas) == 1
    replicas[0].kill()
    data = png(np.full((12, 12, 3), 90, np.uint8))
    deadline, statuses = time.monotonic() + 180, []
    while time.monotonic() < deadline:
        statuses.append(server.request("POST", "/predict", data, {"Content-Type": "image/png"})[0])
        if statuses[-1] == 200:
            break
        time.sleep(0.5)
    assert statuses[-1] == 200, statuses
    assert server.request("GET", "/health", token=None)[0] == 200
    now = [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)
           if "ServeReplica" in " ".join(p.cmdline())]
    assert now and replicas[0].pid not in now
