"""Data roots on a loopback S3 (moto, tests/s3_server.py) through the tools, as a user runs them: training and
evaluation from ``s3://`` equal the same runs from the local copy, every storage failure is one message without a
traceback, and no credential lands in a work dir."""

from __future__ import annotations

import glob
import json
import os
import subprocess

import pytest
from demo_utils import DEMO_CFG, DET_DEMO_CFG, demo_overrides, det_demo_overrides, run_tool
from s3_server import SECRET_ACCESS_KEY, refusing_s3_server

SPLITS = ("train", "val", "test")
#: scalars that measure the machine, not the data
TIMING = {"time", "data_time", "eta", "samples_per_s", "memory"}


def storage_overrides(endpoint: str, **extra: str) -> dict:
    """``storage_options`` for the three dataloaders (the endpoint only: credentials are in the environment)."""
    inner = ", ".join([f"endpoint_url: '{endpoint}'", *(f"{k}: {v}" for k, v in extra.items())])
    return {f"{s}_dataloader.dataset.storage_options": f"{{{inner}}}" for s in SPLITS}


def scalars(work) -> list[dict]:
    """The run's logged scalars (losses, learning rates, metrics) without the timings."""
    (path,) = glob.glob(os.path.join(str(work), "*", "vis_data", "scalars.json"))
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def no_secret_in(*folders) -> None:
    found = subprocess.run(["grep", "-rl", SECRET_ACCESS_KEY, *map(str, folders)], capture_output=True, text=True)
    assert found.stdout == "", f"the secret access key was written to {found.stdout}"


def train_and_eval(config: str, opts: list[str], work) -> tuple[list[dict], dict]:
    run_tool("train.py", "-c", config, "--work-dir", str(work), "-o", *opts)
    ckpt = (work / "last_checkpoint").read_text().strip()
    run_tool("eval.py", "-c", config, "-w", ckpt, "--work-dir", str(work / "eval"), "-o", *opts)
    metrics = json.loads((work / "eval" / "metrics.json").read_text())["metrics"]
    return scalars(work), metrics


@pytest.mark.slow
@pytest.mark.parametrize("config, overrides, metric, workers", [
    (DEMO_CFG, demo_overrides, "mIoU", 2),  # DataLoader workers (forked) read the bucket too
    (DET_DEMO_CFG, det_demo_overrides, "coco/bbox_mAP", 0),
], ids=["unet", "yolov3"])
def test_training_and_evaluation_from_s3_equal_the_local_run(s3_server, demo_data, tmp_path, config, overrides,
                                                              metric, workers):
    # two iterations (16 images, batches of 8), one evaluation; the same seed for both runs
    extra = {"train_dataloader.batch_size": 8, "randomness.seed": 3}
    extra.update({f"{s}_dataloader.num_workers": workers for s in SPLITS})
    local_scalars, local_metrics = train_and_eval(config, overrides(demo_data, **extra), tmp_path / "local")
    url = f"s3://{s3_server.bucket}/shapes"
    s3_opts = overrides(url, **extra, **storage_overrides(s3_server.endpoint_url))
    s3_scalars, s3_metrics = train_and_eval(config, s3_opts, tmp_path / "s3")

    assert len(s3_scalars) >= 3 and any("loss" in row for row in s3_scalars)
    assert s3_scalars == local_scalars  # the same losses at every iteration and the same validation metrics
    assert metric in s3_metrics and s3_metrics == local_metrics
    config_yaml = (tmp_path / "s3" / "config.yaml").read_text()
    assert url in config_yaml and s3_server.endpoint_url in config_yaml
    no_secret_in(tmp_path / "s3", tmp_path / "local")


def _train_error(config: str, opts: list[str], work) -> str:
    proc = run_tool("train.py", "-c", config, "--work-dir", str(work), "-o", *opts, check=False)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_a_missing_folder_names_the_url(s3_server, tmp_path):
    url = f"s3://{s3_server.bucket}/no-such-set"
    err = _train_error(DEMO_CFG, demo_overrides(url, **storage_overrides(s3_server.endpoint_url)), tmp_path)
    assert f"image folder not found: {url}/images/train" in err


def test_a_missing_annotation_file_names_the_url(s3_server, tmp_path):
    url = f"s3://{s3_server.bucket}/no-such-set"
    err = _train_error(DET_DEMO_CFG, det_demo_overrides(url, **storage_overrides(s3_server.endpoint_url)), tmp_path)
    assert f"annotation file {url}/annotations/instances_train.json not found" in err


def test_an_unknown_protocol_is_named(tmp_path):
    err = _train_error(DEMO_CFG, demo_overrides("oarsnosuch://bucket/shapes"), tmp_path)
    assert "oarsnosuch://bucket/shapes/images/train: unknown protocol 'oarsnosuch'" in err


def test_an_unreachable_endpoint_is_named(s3_server, tmp_path):
    closed = s3_server.endpoint_url.rsplit(":", 1)[0] + ":9"  # the discard port: nothing listens
    opts = demo_overrides(f"s3://{s3_server.bucket}/shapes", **storage_overrides(
        closed, config_kwargs="{retries: {max_attempts: 1}, connect_timeout: 2}"))
    err = _train_error(DEMO_CFG, opts, tmp_path)
    assert f"s3://{s3_server.bucket}/shapes/images/train: cannot reach the storage endpoint" in err
    assert "check storage_options.endpoint_url" in err


def test_wrong_credentials_are_access_denied(s3_server, tmp_path):
    with refusing_s3_server() as endpoint:
        err = _train_error(DEMO_CFG, demo_overrides(f"s3://{s3_server.bucket}/shapes", **storage_overrides(endpoint)),
                           tmp_path)
    assert f"s3://{s3_server.bucket}/shapes/images/train: access denied" in err
    assert "AWS_ACCESS_KEY_ID" in err  # where credentials belong


def test_a_credential_in_the_config_is_refused_and_never_written(s3_server, tmp_path):
    opts = demo_overrides(f"s3://{s3_server.bucket}/shapes",
                          **storage_overrides(s3_server.endpoint_url, secret=SECRET_ACCESS_KEY))
    err = _train_error(DEMO_CFG, opts, tmp_path / "work")
    assert "SegDataset: storage_options: secret: a credential in the config is refused" in err
    assert SECRET_ACCESS_KEY not in err
    no_secret_in(tmp_path)
