"""ActivityNetFeatureDataset on a URL data root (``memory://``, in-process): the annotation JSON and the feature files
are read through the storage layer, giving the samples and features of the same set on local disk; a missing
annotation object or feature object is one message naming its URL."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from oars.errors import DataError, DataFileNotFoundError
from video.registry import DATASETS

C = 8
PIPELINE = [dict(type="LoadLocalizationFeature", feat_dim=C), dict(type="ResizeTemporal", temporal_dim=50),
            dict(type="GenerateLocalizationLabels"), dict(type="PackLocalizationInputs")]
DATABASE = {
    "v_a": {"duration_second": 20.0, "subset": "training",
            "annotations": [{"segment": [2.0, 10.0], "label": "jump"}, {"segment": [12.0, 20.0], "label": "run"}]},
    "v_b": {"duration_second": 10.0, "subset": "training", "annotations": [{"segment": [0.0, 5.0], "label": "run"}]},
    "v_c": {"duration_second": 8.0, "subset": "validation", "annotations": [{"segment": [1.0, 3.0], "label": "jump"}]},
}


@pytest.fixture
def url_set(tmp_path, memory_store):
    """(local root, ``memory://`` root) holding ``anet.json`` and ``feats/<video>.npy`` (the shared ``memory_store``:
    a fresh store and registry)."""
    root = tmp_path / "anet"
    (root / "feats").mkdir(parents=True)
    (root / "anet.json").write_text(json.dumps({"version": "VERSION 1.3", "database": DATABASE}))
    rng = np.random.default_rng(0)
    for k, vid in enumerate(DATABASE):
        np.save(root / "feats" / f"{vid}.npy", rng.standard_normal((30 + 7 * k, C)).astype(np.float32))
    return str(root), memory_store(str(root), "anet")


def build(root: str, **kw):
    cfg = dict(type="ActivityNetFeatureDataset", data_root=root, ann_file="anet.json", data_prefix={"feature": "feats"},
               pipeline=PIPELINE, subset="training")
    cfg.update(kw)
    return DATASETS.build(cfg)


def test_a_url_data_root_gives_the_local_samples_and_features(url_set):
    local_root, url = url_set
    local, remote = build(local_root), build(url)
    assert remote.metainfo["classes"] == local.metainfo["classes"] == ("jump", "run")
    assert len(remote) == len(local) == 2
    for i in range(2):
        a, b = local.get_data_info(i), remote.get_data_info(i)
        assert b["feature_path"] == f"{url}/feats/{b['video_name']}.npy"  # a URL, not made a local absolute path
        assert a["feature_path"].endswith(f"/feats/{a['video_name']}.npy") and a["feature_path"].startswith("/")
        np.testing.assert_array_equal(a["gt_segments"], b["gt_segments"])
        x, y = local[i], remote[i]
        assert torch.equal(x["inputs"], y["inputs"])
        assert torch.equal(x["data_samples"].gt_bbox, y["data_samples"].gt_bbox)
    # an absolute URL ann_file is taken as it is, whatever the data_root
    assert len(build(local_root, ann_file=f"{url}/anet.json", data_prefix={"feature": f"{url}/feats"})) == 2


def test_a_missing_annotation_or_feature_object_names_its_url(url_set, memory_store):
    _, url = url_set
    with pytest.raises(DataFileNotFoundError, match=rf"annotation file not found: {url}/none\.json"):
        build(url, ann_file="none.json")
    memory_store.remove(f"{url}/feats/v_b.npy")
    ds = build(url)
    assert len(ds.get_data_info(0)) > 0
    with pytest.raises(DataError, match=rf"{url}/feats/v_b\.npy"):
        ds[1]
    memory_store.pipe(f"{url}/bad.json", b"{not json")
    with pytest.raises(DataError, match=rf"{url}/bad\.json is not a readable JSON file"):
        build(url, ann_file="bad.json")
