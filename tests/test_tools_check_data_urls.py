"""tools/check_data.py on data in a bucket (the loopback moto S3 of tests/s3_server.py, and ``memory://``): a planted
bad file is named with its URL, ``--sample N`` reads a seeded random sample of N, a missing bucket or object is one
message naming the URL, and the flags' bad values are refused with one message each."""

from __future__ import annotations

import os

import pytest
from demo_utils import DEMO_CFG, run_tool

from oars.config import load_config
from oars.data import storage
from oars.data.check import check_config, format_reports, parse_storage_options, sample_indices
from oars.errors import DataError

fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")


@pytest.fixture
def mem_shapes(demo_data, monkeypatch, tmp_path):
    """The demo shapes set at ``memory://oars-check/shapes`` (a fresh store and storage registry)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("OARS_STORAGE_OPTIONS", raising=False)
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(storage, "_listings", {})
    fs = fsspec.filesystem("memory")
    fs.put(demo_data.rstrip("/") + "/", "/oars-check/shapes/", recursive=True)
    yield "memory://oars-check/shapes"
    fs.rm("/oars-check", recursive=True)


def test_sample_indices_are_seeded_and_sorted():
    assert sample_indices(5, None, 0) == [0, 1, 2, 3, 4] == sample_indices(5, 9, 0)
    a, b, c = sample_indices(100, 7, 0), sample_indices(100, 7, 0), sample_indices(100, 7, 1)
    assert a == b == sorted(a) and len(set(a)) == 7 and a != c


def test_check_config_on_a_url_data_root_with_a_sample(mem_shapes):
    cfg = load_config(DEMO_CFG)
    fsspec.filesystem("memory").pipe("/oars-check/shapes/images/val/0003.png", b"not a png")
    reports = check_config(cfg, ["val"], num_workers=0, data_root=mem_shapes)
    (report,) = reports
    assert report.num_samples == 8 and report.seed is None
    image = f"{mem_shapes}/images/val/0003.png"
    assert report.failures == [(f"{image} + {mem_shapes}/labels/val/0003.png",
                                f"could not read image (unsupported or corrupt file): {image}")]
    assert format_reports(reports).endswith("val (SegDataset): 8 sample(s) read, 1 bad")
    (sampled,) = check_config(cfg, ["val"], num_workers=0, data_root=mem_shapes, sample=3, seed=0)
    assert (sampled.num_samples, sampled.num_total, sampled.seed) == (3, 8, 0)
    assert len(sampled.failures) == int(3 in sample_indices(8, 3, 0))
    assert format_reports([sampled]).endswith(
        f"val (SegDataset): 3 of 8 sample(s) read (a random sample, seed 0), {len(sampled.failures)} bad")


def test_a_missing_folder_is_one_failure_naming_the_url(mem_shapes):
    (report,) = check_config(load_config(DEMO_CFG), ["val"], num_workers=0, data_root=f"{mem_shapes}/none")
    assert report.num_samples == 0 and len(report.failures) == 1
    what, reason = report.failures[0]
    assert what == "val dataset SegDataset" and f"image folder not found: {mem_shapes}/none/images/val" in reason


def test_storage_options_from_the_command_line():
    assert parse_storage_options(["endpoint_url=http://127.0.0.1:9000", "anon=true",
                                  "config_kwargs.read_timeout=5"]) == {
        "endpoint_url": "http://127.0.0.1:9000", "anon": True, "config_kwargs": {"read_timeout": 5}}
    with pytest.raises(DataError, match=r"--storage-option 'anon': expected KEY=VALUE"):
        parse_storage_options(["anon"])
    with pytest.raises(DataError, match=r"--storage-option: secret: a credential in the config is refused"):
        parse_storage_options(["secret=abc"])


@pytest.mark.slow  # two subprocesses on the loopback S3: ~15 s alone, more on a shared machine
def test_check_data_on_s3_names_a_planted_problem_and_checks_a_sample(s3_server, demo_data, tmp_path):
    url = s3_server.upload(demo_data, "check/shapes")
    fs = s3_server.filesystem()
    fs.pipe(f"{url}/labels/val/0005.png", b"not a png")
    common = ["-c", DEMO_CFG, "--split", "val", "--workers", "1", "--data-root", url,
              "--storage-option", f"endpoint_url={s3_server.endpoint_url}"]
    proc = run_tool("check_data.py", *common, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert f"val: {url}/images/val/0005.png + {url}/labels/val/0005.png: could not read label map" in proc.stdout
    assert "val (SegDataset): 8 sample(s) read, 1 bad" in proc.stdout
    assert "error: 1 bad sample(s)" in proc.stderr and "sample/s" in proc.stderr  # the progress bar
    proc = run_tool("check_data.py", *common, "--sample", "2", "--seed", "3", check=False)
    bad = int(5 in sample_indices(8, 2, 3))
    assert f"val (SegDataset): 2 of 8 sample(s) read (a random sample, seed 3), {bad} bad" in proc.stdout, proc.stderr
    assert "2 of 8 (seed 3)" in proc.stderr  # the progress bar says what it reads


@pytest.mark.slow  # subprocesses: ~10 s alone
def test_check_data_on_a_missing_bucket_and_bad_flags_gives_one_message(s3_server, tmp_path):
    missing = "s3://no-such-bucket-oars/shapes"
    proc = run_tool("check_data.py", "-c", DEMO_CFG, "--split", "val", "--workers", "1", "--data-root", missing,
                    "--storage-option", f"endpoint_url={s3_server.endpoint_url}", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"val: val dataset SegDataset: cannot be built: image folder not found: {missing}/images/val\n" \
        in proc.stdout
    for flags, message in ((["--sample", "0"], "error: --sample 0: expected a positive number of samples"),
                           (["--storage-option", "token=x"], "error: --storage-option: token: a credential in the "
                                                             "config is refused")):
        proc = run_tool("check_data.py", "-c", DEMO_CFG, *flags, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert os.path.isdir(tmp_path)
