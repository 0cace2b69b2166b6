"""oars.data.storage: one place that opens a local path or a URL (fsspec), tested on ``memory://`` and ``file://``
and with a filesystem that fails on purpose (access denied, timeout, unreachable endpoint)."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
from PIL import Image

from oars.data import storage
from oars.data.transforms.loading import read_image, read_label_map
from oars.errors import DataError, DataFileNotFoundError

fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")
AbstractFileSystem = fsspec.spec.AbstractFileSystem


@pytest.fixture
def mem():
    """A clean ``memory://`` store and storage registry for one test."""
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs[:] = [""]
    saved = dict(storage._registered), dict(storage._listings), os.environ.pop("OARS_STORAGE_OPTIONS", None)
    storage._registered.clear()
    storage._listings.clear()
    yield fs
    fs.store.clear()
    storage._registered.clear()
    storage._registered.update(saved[0])
    storage._listings.clear()
    storage._listings.update(saved[1])
    os.environ.pop("OARS_STORAGE_OPTIONS", None)
    if saved[2] is not None:
        os.environ["OARS_STORAGE_OPTIONS"] = saved[2]


def _png(arr: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", arr)
    assert ok
    return data.tobytes()


def test_is_url_join_absolute_keep_local_paths_as_they_are():
    assert storage.is_url("s3://b/k") and storage.is_url("memory://x") and storage.is_url("simplecache::s3://b/k")
    assert not storage.is_url("data/demo_shapes") and not storage.is_url("/abs/path") and not storage.is_url("C:\\x")
    assert storage.join("data/x", "images/train") == os.path.join("data/x", "images/train")
    assert storage.join("s3://b/root/", "images/train", "a.png") == "s3://b/root/images/train/a.png"
    assert storage.join("s3://b/root", "memory://other/x") == "memory://other/x"  # a URL part replaces, as abs paths
    assert storage.absolute("rel/x") == os.path.abspath("rel/x") and storage.absolute("s3://b/k") == "s3://b/k"
    ann, prefix = storage.join_root("s3://b/root", "ann/train.json", {"img": "images", "seg": "memory://m/l"})
    assert ann == "s3://b/root/ann/train.json" and prefix == {"img": "s3://b/root/images", "seg": "memory://m/l"}


def test_memory_files_read_list_and_exist(mem):
    mem.pipe("/b/set/a.txt", b"one\ntwo\n")
    mem.pipe("/b/set/sub/c.png", b"x")
    with storage.open_file("memory://b/set/a.txt", "r", encoding="utf-8") as f:
        assert f.read().split() == ["one", "two"]
    assert storage.read_bytes("memory://b/set/sub/c.png") == b"x"
    assert storage.list_dir("memory://b/set") == ["a.txt", "sub/c.png"]
    assert storage.isdir("memory://b/set") and not storage.isdir("memory://b/none")
    assert storage.isfile("memory://b/set/a.txt") and not storage.isfile("memory://b/set")
    assert storage.exists("memory://b/set/sub") and not storage.exists("memory://b/set/zz")
    assert storage.listed_isfile("memory://b/set/sub/c.png") and not storage.listed_isfile("memory://b/set/sub/d.png")
    assert not storage.listed_isfile("memory://b/absent/x.png")  # a missing folder lists nothing


def test_missing_object_and_unknown_protocol_are_one_line_naming_the_url(mem):
    with pytest.raises(DataFileNotFoundError, match=r"^memory://b/nope\.png: not found"):
        storage.read_bytes("memory://b/nope.png")
    with pytest.raises(DataError, match=r"^oarsnosuch://b/k: unknown protocol 'oarsnosuch'") as err:
        storage.read_bytes("oarsnosuch://b/k")
    assert "\n" not in str(err.value)


def test_a_missing_implementation_names_what_to_install():
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match=r"gs://b/k: reading gs:// URLs needs gcsfs \(pip install gcsfs\)"):
            storage.read_bytes("gs://b/k")
    else:  # pragma: no cover - only where gcsfs is installed
        pytest.skip("gcsfs is installed here")


class _FailingFS(AbstractFileSystem):
    """A filesystem whose every read raises ``error`` (what a backend raises for that failure)."""

    protocol = "oarsfail"
    cachable = False

    def __init__(self, error: str = "denied", **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def _raise(self, *args, **kwargs):
        import botocore.exceptions as bx

        errors = {
            "denied": PermissionError("Forbidden"),
            "client403": bx.ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                                         "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetObject"),
            "timeout": TimeoutError("read timed out after 5 s"),
            "read_timeout": bx.ReadTimeoutError(endpoint_url="http://127.0.0.1:9"),
            "unreachable": bx.EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
            "bug": KeyError("a bug"),
        }
        raise errors[self.error]

    cat_file = info = ls = _open = _raise


@pytest.mark.parametrize("error, message", [
    ("denied", r"^oarsfail://b/k\.png: access denied \(PermissionError: Forbidden\); credentials come from the "
               r"environment \(AWS_ACCESS_KEY_ID"),
    ("client403", r"^oarsfail://b/k\.png: access denied \(ClientError: .*AccessDenied"),
    ("timeout", r"^oarsfail://b/k\.png: timed out \(TimeoutError: read timed out after 5 s\)"),
    ("read_timeout", r"^oarsfail://b/k\.png: timed out \(ReadTimeoutError"),
    ("unreachable", r"^oarsfail://b/k\.png: cannot reach the storage endpoint \(EndpointConnectionError.*"
                    r"check storage_options\.endpoint_url"),
])
def test_backend_failures_are_one_line_naming_the_url(error, message):
    pytest.importorskip("botocore")
    fsspec.register_implementation("oarsfail", _FailingFS, clobber=True)
    with pytest.raises(DataError, match=message) as err:
        storage.read_bytes("oarsfail://b/k.png", {"error": error})
    assert "\n" not in str(err.value)


def test_an_error_that_is_not_about_storage_keeps_its_traceback():
    pytest.importorskip("botocore")
    fsspec.register_implementation("oarsfail", _FailingFS, clobber=True)
    with pytest.raises(KeyError):
        storage.read_bytes("oarsfail://b/k.png", {"error": "bug"})


@pytest.mark.parametrize("options, named", [
    ({"endpoint_url": "http://h:9000", "key": "AKIA"}, "key"),
    ({"secret": "s"}, "secret"),
    ({"client_kwargs": {"aws_secret_access_key": "s", "region_name": "x"}}, "client_kwargs.aws_secret_access_key"),
    ({"token": "t"}, "token"),
    ({"password": "p"}, "password"),
    ({"aws_session_token": "t"}, "aws_session_token"),
])
def test_credentials_in_the_options_are_refused(options, named):
    with pytest.raises(DataError, match=rf"^CocoDataset: storage_options: {named}: a credential in the config is "
                                        r"refused .*environment \(AWS_ACCESS_KEY_ID"):
        storage.check_options(options, "CocoDataset: storage_options")


def test_good_options_pass_and_bad_ones_are_named():
    good = {"endpoint_url": "http://127.0.0.1:9000", "anon": False, "client_kwargs": {"region_name": "eu-west-1"},
            "cache": "simplecache", "cache_dir": "/tmp/c"}
    assert storage.check_options(good) == good
    assert storage.check_options(None) == {}
    with pytest.raises(DataError, match=r"cache must be one of \['simplecache', 'filecache'\] or none, got 'lru'"):
        storage.check_options({"cache": "lru"})
    with pytest.raises(DataError, match=r"storage_options must be a mapping"):
        storage.check_options(["endpoint_url"])
    with pytest.raises(DataError, match=r"apply to a URL data_root .* data_root 'data/x' is a local path"):
        storage.register_options("data/x", {"anon": True})
    storage.register_options("data/x", None)  # a local root without options: nothing to do


def test_registered_options_apply_under_their_root_and_reach_spawned_workers(mem):
    storage.register_options("s3://b/root", {"endpoint_url": "http://a"})
    storage.register_options("s3://b/root/deeper", {"endpoint_url": "http://b"})
    assert storage.options_for("s3://b/root/x.png") == {"endpoint_url": "http://a"}
    assert storage.options_for("s3://b/root/deeper/x.png") == {"endpoint_url": "http://b"}
    assert storage.options_for("s3://b/rootless/x.png") == {}
    storage._registered.clear()  # a spawned worker starts with an empty table and the parent's environment
    assert storage.options_for("s3://b/root/x.png") == {"endpoint_url": "http://a"}


def test_simplecache_keeps_a_local_copy(mem, tmp_path):
    mem.pipe("/b/img.bin", b"original")
    options = {"cache": "simplecache", "cache_dir": str(tmp_path / "cache")}
    assert storage.read_bytes("memory://b/img.bin", options) == b"original"
    assert len(os.listdir(tmp_path / "cache")) == 1
    mem.rm("/b/img.bin")  # served from the cache now
    assert storage.read_bytes("memory://b/img.bin", options) == b"original"
    with pytest.raises(DataFileNotFoundError):  # without the cache, the object is gone
        storage.read_bytes("memory://b/img.bin")


def test_local_copy_is_a_local_file_and_local_paths_are_kept(mem, tmp_path):
    mem.pipe("/b/ann.json", b'{"images": []}')
    path = storage.local_copy("memory://b/ann.json", {"cache_dir": str(tmp_path)})
    assert path.startswith(str(tmp_path)) and open(path, "rb").read() == b'{"images": []}'
    assert storage.local_copy("data/x.json") == "data/x.json"


def test_images_and_label_maps_from_urls_equal_the_local_reads(mem, tmp_path):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)
    local_img = tmp_path / "a.png"
    local_img.write_bytes(_png(img))
    labels = Image.fromarray(rng.integers(0, 4, (12, 10), dtype=np.uint8), mode="L")
    local_lbl = tmp_path / "a_label.png"
    labels.save(local_lbl)
    mem.pipe("/b/a.png", local_img.read_bytes())
    mem.pipe("/b/a_label.png", local_lbl.read_bytes())
    for url in ("memory://b/a.png", f"file://{local_img}"):
        for color in ("color", "grayscale", "unchanged"):
            np.testing.assert_array_equal(read_image(url, color), read_image(str(local_img), color))
    np.testing.assert_array_equal(read_image("memory://b/a.png"), img)
    for url in ("memory://b/a_label.png", f"file://{local_lbl}"):
        np.testing.assert_array_equal(read_label_map(url), np.array(labels))
    with pytest.raises(DataFileNotFoundError, match=r"^memory://b/none\.png: not found"):
        read_image("memory://b/none.png")
    mem.pipe("/b/bad.png", b"not an image at all")
    with pytest.raises(DataError, match=r"could not read image .*memory://b/bad\.png"):
        read_image("memory://b/bad.png")
    with pytest.raises(DataError, match=r"could not read label map .*memory://b/bad\.png"):
        read_label_map("memory://b/bad.png")


def test_a_decompression_bomb_url_is_refused_from_its_header(mem):
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    mem.pipe("/b/bomb.png", png)
    with pytest.raises(DataError, match=r"^memory://b/bomb\.png: image of 20000x20000 = 400000000 pixels"):
        read_image("memory://b/bomb.png")


def test_a_local_path_never_goes_through_fsspec(monkeypatch, tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(_png(np.zeros((4, 4, 3), np.uint8)))

    def no_fsspec(*args, **kwargs):
        raise AssertionError("fsspec used for a local path")

    monkeypatch.setattr(storage, "_filesystem", no_fsspec)
    monkeypatch.setattr(storage, "read_bytes", no_fsspec)
    assert read_image(str(path)).shape == (4, 4, 3)
    with storage.open_file(str(path)) as f:
        assert f.read(4) == b"\x89PNG"
    assert storage.listed_isfile(str(path)) and storage.isdir(str(tmp_path))
    assert storage.list_dir(str(tmp_path)) == ["a.png"]
