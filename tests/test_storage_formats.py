"""Every dataset format reads a URL data root (``memory://`` here, in-process and fast; ``s3://`` on the loopback moto
server for VOC, YOLO and frame folders at the end) exactly as it reads the local folder: the same samples, the same
annotations, the same pixels; a missing object is one message naming its URL (tests/storage_format_sets.py builds the
tiny sets from the demo shapes)."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pytest
import storage_format_sets as sets

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

fsspec = pytest.importorskip("fsspec", reason="fsspec (the data extra) reads URLs")


def relative(infos: list[dict], root: str) -> list[dict]:
    """The data infos with every path value under ``root`` made relative to it (str values only)."""
    def rel(v):
        return v[len(root.rstrip("/")) + 1:] if isinstance(v, str) and v.startswith(root.rstrip("/") + "/") else v

    return [{k: rel(v) for k, v in info.items()} for info in infos]


def without_info(coco: dict) -> dict:
    """A converted COCO dict less its ``info`` (which names the source, a path or a URL)."""
    return {k: v for k, v in coco.items() if k != "info"}


def infos_of(dataset) -> list[dict]:
    return [dataset.get_data_info(i) for i in range(len(dataset))]


def same_samples(local, remote, local_root: str, url: str) -> list[dict]:
    """Assert that ``remote`` holds ``local``'s samples (paths relative to each root); returns them."""
    a, b = relative(infos_of(local), local_root), relative(infos_of(remote), url)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for key in x:
            if isinstance(x[key], np.ndarray):
                np.testing.assert_array_equal(x[key], y[key])
            else:
                assert x[key] == y[key], key
    return b


def test_voc_on_a_url_gives_the_local_samples(demo_data, tmp_path, memory_store):
    from detection.datasets.voc import VOCDataset

    root = sets.make_voc(demo_data, str(tmp_path / "voc"))
    url = memory_store(root, "voc")
    args = dict(ann_file="ImageSets/Main/val.txt", img_suffix=".png", classes=sets.SHAPES, test_mode=True)
    infos = same_samples(VOCDataset(data_root=root, **args), VOCDataset(data_root=url, **args), root, url)
    assert infos[0]["img_path"] == "JPEGImages/0000.png" and sum(len(i["instances"]) for i in infos) > 0
    memory_store.remove(f"{url}/Annotations/0002.xml")
    with pytest.raises(DataFileNotFoundError, match=rf"annotation {url}/Annotations/0002\.xml not found"):
        VOCDataset(data_root=url, **args)
    with pytest.raises(DataFileNotFoundError, match=rf"image list {url}/none\.txt not found"):
        VOCDataset(data_root=url, **dict(args, ann_file="none.txt"))


def test_voc_to_coco_reads_a_url(demo_data, tmp_path, memory_store):
    from detection.datasets.converters import voc_to_coco

    root = sets.make_voc(demo_data, str(tmp_path / "voc"))
    url = memory_store(root, "voc")
    local = voc_to_coco(root, "ImageSets/Main/val.txt", img_suffix=".png")
    remote = voc_to_coco(url, "ImageSets/Main/val.txt", img_suffix=".png")
    assert remote["images"] == local["images"] and remote["annotations"] == local["annotations"]
    assert [c["name"] for c in remote["categories"]] == sets.SHAPES


def test_yolo_txt_on_a_url_gives_the_local_samples(demo_data, tmp_path, memory_store):
    from detection.datasets.yolo_txt import YOLOTxtDataset

    root = sets.make_yolo(demo_data, str(tmp_path / "yolo"))
    url = memory_store(root, "yolo")
    args = dict(data_yaml="data.yaml", split="val", test_mode=True)
    local, remote = YOLOTxtDataset(data_root=root, **args), YOLOTxtDataset(data_root=url, **args)
    infos = same_samples(local, remote, root, url)
    assert infos[0]["img_path"] == "images/val/0000.png" and remote.metainfo["classes"] == tuple(sets.SHAPES)
    # the YAML given as a URL, without data_root
    assert relative(infos_of(YOLOTxtDataset(data_yaml=f"{url}/data.yaml", split="val", test_mode=True)), url) == infos
    # a bad line is named with the label file's URL
    memory_store.pipe(f"{url}/labels/val/0001.txt", b"7 0.5 0.5 0.1 0.1\n")
    with pytest.raises(DataError, match=rf"{url}/labels/val/0001\.txt:1: class id 7"):
        YOLOTxtDataset(data_root=url, **args)
    with pytest.raises(DataFileNotFoundError, match=rf"data YAML {url}/none\.yaml not found"):
        YOLOTxtDataset(data_root=url, **dict(args, data_yaml="none.yaml"))


def test_cvat_xml_on_a_url_converts_as_the_local_file(demo_data, tmp_path, memory_store):
    from detection.datasets.cvat import cvat_to_coco

    root = sets.make_cvat_xml(demo_data, str(tmp_path / "cvat"))
    url = memory_store(root, "cvat")
    local, _ = cvat_to_coco(os.path.join(root, "annotations.xml"), img_dir=os.path.join(root, "images"))
    remote, _ = cvat_to_coco(f"{url}/annotations.xml", img_dir=f"{url}/images")
    assert remote["info"]["description"].endswith(f"{url}/annotations.xml")
    assert without_info(remote) == without_info(local) and len(remote["annotations"]) > 0
    memory_store.remove(f"{url}/images/0001.png")
    with pytest.raises(DataFileNotFoundError, match=rf"not found under --img-dir {url}/images: {url}/images/0001\.png"):
        cvat_to_coco(f"{url}/annotations.xml", img_dir=f"{url}/images")
    with pytest.raises(DataFileNotFoundError, match=rf"--input {url}/none\.xml not found"):
        cvat_to_coco(f"{url}/none.xml")


def test_labelme_on_a_url_converts_as_the_local_folder(demo_data, tmp_path, memory_store):
    from detection.datasets.converters import labelme_to_coco
    from segmentation.datasets.labelme import labelme_to_seg

    root = sets.make_labelme(demo_data, str(tmp_path / "labelme"))
    url = memory_store(root, "labelme")
    local, remote = labelme_to_coco(root), labelme_to_coco(url)
    assert remote["info"]["description"].endswith(url)
    assert without_info(remote) == without_info(local)
    assert [i["file_name"] for i in remote["images"]] == ["0000.png", "0001.png", "0002.png"]
    a = labelme_to_seg(root, str(tmp_path / "seg_local"))
    b = labelme_to_seg(url, str(tmp_path / "seg_url"))
    assert a["classes"] == b["classes"] and a["shapes"] == b["shapes"]
    for x, y in zip(a["files"], b["files"]):
        with open(x, "rb") as f, open(y, "rb") as g:
            assert f.read() == g.read()
    memory_store.remove(f"{url}/0001.png")
    with pytest.raises(DataFileNotFoundError, match=rf"{url}/0001\.json: imagePath '0001\.png' -> {url}/0001\.png"):
        labelme_to_coco(url)
    with pytest.raises(DataFileNotFoundError, match=rf"labelme folder {url}/none not found"):
        labelme_to_coco(f"{url}/none")


def test_cityscapes_polygons_and_label_ids_on_a_url(tmp_path, memory_store):
    from PIL import Image

    from segmentation.datasets.cityscapes import CityscapesDataset
    from segmentation.datasets.cityscapes_polygons import cityscapes_to_train_ids

    gt = sets.make_cityscapes_polygons(str(tmp_path / "cs"))
    url = memory_store(gt, "cs/gtFine")
    a = cityscapes_to_train_ids(gt, str(tmp_path / "maps_local"))
    b = cityscapes_to_train_ids(url, str(tmp_path / "maps_url"))
    assert a["labels"] == b["labels"] == {"road": 1, "car": 1}
    assert [os.path.relpath(p, tmp_path / "maps_url") for p in b["files"]] == ["val/city/a_gtFine_labelTrainIds.png"]
    with open(a["files"][0], "rb") as f, open(b["files"][0], "rb") as g:
        assert f.read() == g.read()
    # the label maps beside their images: CityscapesDataset reads the URL tree as the local one
    root = str(tmp_path / "cs")
    os.makedirs(os.path.join(root, "leftImg8bit", "val", "city"))
    Image.new("RGB", (32, 24)).save(os.path.join(root, "leftImg8bit", "val", "city", "a_leftImg8bit.png"))
    os.replace(a["files"][0], os.path.join(gt, "val", "city", "a_gtFine_labelTrainIds.png"))
    url = memory_store(root, "cs")
    args = dict(img_dir="leftImg8bit/val", ann_dir="gtFine/val", test_mode=True)
    infos = same_samples(CityscapesDataset(data_root=root, **args), CityscapesDataset(data_root=url, **args), root, url)
    assert infos[0]["seg_map_path"] == "gtFine/val/city/a_gtFine_labelTrainIds.png"
    memory_store.remove(f"{url}/gtFine/val/city/a_gtFine_polygons.json")
    memory_store.remove(f"{url}/gtFine/val/city/a_gtFine_labelTrainIds.png")
    with pytest.raises(DataFileNotFoundError, match=rf"--input {url}/gtFine: no \*_gt\*_polygons\.json files found"):
        cityscapes_to_train_ids(f"{url}/gtFine", str(tmp_path / "none"))


def test_a_list_file_on_a_url_gives_the_local_samples(demo_data, tmp_path, memory_store):
    from segmentation.datasets.list_file import ListFileSegDataset

    root = str(tmp_path / "set")
    shutil.copytree(demo_data, root)
    with open(os.path.join(root, "val.txt"), "w") as f:
        f.write("".join(f"images/val/{i:04d}.png labels/val/{i:04d}.png\n" for i in range(8)))
    url = memory_store(root, "list")
    args = dict(list_file="val.txt", classes=["background", "circle", "square", "triangle"], test_mode=True)
    infos = same_samples(ListFileSegDataset(data_root=root, **args), ListFileSegDataset(data_root=url, **args),
                         root, url)
    assert len(infos) == 8 and infos[3]["img_path"] == "images/val/0003.png"
    assert infos[3]["seg_map_path"] == "labels/val/0003.png"
    memory_store.remove(f"{url}/labels/val/0005.png")
    with pytest.raises(DataFileNotFoundError, match=rf"{url}/val\.txt line 6: label map {url}/labels/val/0005\.png"):
        ListFileSegDataset(data_root=url, **args)


def test_frame_folders_on_a_url_decode_the_same_frames(tmp_path, memory_store):
    from video.datasets.loading import RawFrameDecode
    from video.datasets.video_dataset import RawframeDataset

    root = sets.make_frames(str(tmp_path / "frames"))
    url = memory_store(root, "frames")
    args = dict(ann_file="list.txt", classes="classes.txt", filename_tmpl="img_{:05d}.png")
    local, remote = RawframeDataset(data_root=root, **args), RawframeDataset(data_root=url, **args)
    infos = same_samples(local, remote, root, url)
    assert infos[1]["frame_dir"] == "frames/v1" and infos[1]["label"] == 1

    def frames(info):
        return np.stack(RawFrameDecode()(dict(info, frame_inds=np.array([0, 2, 5])))["imgs"])

    np.testing.assert_array_equal(frames(remote.get_data_info(1)), frames(local.get_data_info(1)))
    memory_store.remove(f"{url}/frames/v1/img_00003.png")
    with pytest.raises(DataError, match=rf"frame 2 of {url}/frames/v1: {url}/frames/v1/img_00003\.png is not found"):
        frames(remote.get_data_info(1))


def test_activitynet_feature_files_on_a_url_read_as_local_ones(tmp_path, memory_store):
    from video.transforms.localization_loading import LoadVideoClassScores, read_localization_feature

    feat = np.random.default_rng(0).random((5, 4)).astype(np.float32)
    os.makedirs(tmp_path / "feat")
    np.save(tmp_path / "feat" / "v_a.npy", feat)
    np.save(tmp_path / "feat" / "v_a.scores.npy", np.array([0.25, 0.75], np.float32))
    with open(tmp_path / "feat" / "v_b.csv", "w") as f:
        f.write("c0,c1,c2,c3\n" + "".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in feat))
    url = memory_store(str(tmp_path / "feat"), "feat")
    for name in ("v_a.npy", "v_b.csv"):
        local = read_localization_feature(str(tmp_path / "feat" / name), "video x")
        np.testing.assert_array_equal(read_localization_feature(f"{url}/{name}", "video x"), local)
        np.testing.assert_allclose(local, feat, atol=1e-6)
    scores = LoadVideoClassScores()({"feature_path": f"{url}/v_a.npy", "video_name": "v_a"})["class_scores"]
    np.testing.assert_array_equal(scores, [0.25, 0.75])
    with pytest.raises(DataError, match=rf"video x: feature file not found: {url}/none\.npy"):
        read_localization_feature(f"{url}/none.npy", "video x")
    memory_store.pipe(f"{url}/bad.npy", b"not numpy")
    with pytest.raises(DataError, match=rf"video x: cannot read feature file {url}/bad\.npy"):
        read_localization_feature(f"{url}/bad.npy", "video x")


def test_gan_folders_on_a_url_give_the_local_samples(demo_data, tmp_path, memory_store):
    from gan.datasets import ImageFolderGANDataset, PairedImageDataset, UnpairedImageDataset

    url = memory_store(demo_data, "gan")
    pairs = dict(dir_A="images/val", dir_B="labels/val", test_mode=True)
    infos = same_samples(PairedImageDataset(data_root=demo_data, **pairs), PairedImageDataset(data_root=url, **pairs),
                         demo_data, url)
    assert infos[2]["img_A_path"] == "images/val/0002.png" and infos[2]["img_B_path"] == "labels/val/0002.png"
    side = dict(img_dir="images/train", test_mode=True)
    same_samples(PairedImageDataset(data_root=demo_data, **side), PairedImageDataset(data_root=url, **side),
                 demo_data, url)
    unpaired = dict(dir_A="images/train", dir_B="labels/val", test_mode=True)
    infos = same_samples(UnpairedImageDataset(data_root=demo_data, **unpaired),
                         UnpairedImageDataset(data_root=url, **unpaired), demo_data, url)
    assert len(infos) == 16 and infos[0]["img_B_path"].startswith("labels/val/")
    folders = dict(img_dir="images", test_mode=True)
    remote = ImageFolderGANDataset(data_root=url, **folders)
    assert remote.metainfo["classes"] == ("train", "val")
    same_samples(ImageFolderGANDataset(data_root=demo_data, **folders), remote, demo_data, url)
    from gan.transforms import LoadGANImageFromFile

    load = LoadGANImageFromFile(keys=["img_A", "img_B"])
    a = load(dict(PairedImageDataset(data_root=demo_data, **pairs).get_data_info(1)))
    b = load(dict(PairedImageDataset(data_root=url, **pairs).get_data_info(1)))
    np.testing.assert_array_equal(a["img_A"], b["img_A"])
    with pytest.raises(DataFileNotFoundError, match=rf"image folder not found: {url}/none"):
        ImageFolderGANDataset(data_root=url, img_dir="none")


def _idx(path: str, magic: int, arr: np.ndarray, gz: bool) -> None:
    """An IDX file (MNIST's format) holding ``arr``."""
    data = magic.to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape) + arr.tobytes()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)


def test_mnist_idx_files_on_a_url_give_the_local_images(tmp_path, memory_store):
    from gan.datasets import MNISTDataset

    rng = np.random.default_rng(0)
    root = tmp_path / "mnist"
    os.makedirs(root)
    _idx(str(root / "train-images-idx3-ubyte"), 2051, rng.integers(0, 256, (5, 28, 28), dtype=np.uint8), gz=False)
    _idx(str(root / "train-labels-idx1-ubyte.gz"), 2049, np.array([3, 1, 4, 1, 5], np.uint8), gz=True)
    _idx(str(root / "t10k-images-idx3-ubyte.gz"), 2051, rng.integers(0, 256, (2, 28, 28), dtype=np.uint8), gz=True)
    _idx(str(root / "t10k-labels-idx1-ubyte"), 2049, np.array([2, 7], np.uint8), gz=False)
    url = memory_store(str(root), "mnist")
    for split in ("train", "test"):
        local, remote = MNISTDataset(data_root=str(root), split=split), MNISTDataset(data_root=url, split=split)
        infos = same_samples(local, remote, str(root), url)  # the pixels (img) and labels of every image
        assert infos[0]["img_path"].endswith("-images-idx3-ubyte[0]") or infos[0]["img_path"].endswith(".gz[0]")
    assert not np.array_equal(infos_of(remote)[0]["img"], infos_of(remote)[1]["img"])  # the comparison can fail
    memory_store.remove(f"{url}/t10k-labels-idx1-ubyte")
    with pytest.raises(DataFileNotFoundError, match=rf"^MNISTDataset: neither {url}/t10k-labels-idx1-ubyte nor its "
                                                    r"\.gz found$"):
        MNISTDataset(data_root=url, split="test")
    memory_store.pipe(f"{url}/train-images-idx3-ubyte", b"\x00\x00\x08\x01rest")
    with pytest.raises(DataError, match=rf"{url}/train-images-idx3-ubyte has magic number 2049, expected 2051"):
        MNISTDataset(data_root=url)


def test_celeba_on_a_url_gives_the_local_samples_and_pixels(demo_data, tmp_path, memory_store):
    from gan.datasets import CelebADataset
    from gan.transforms import LoadGANImageFromFile

    root = tmp_path / "celeba"
    shutil.copytree(os.path.join(demo_data, "images", "val"), root / "img_align_celeba")
    names = sorted(os.listdir(root / "img_align_celeba"))[:5]
    attrs = ["Black_Hair", "Blond_Hair", "Male"]
    rows = [f"{n} {' '.join('1' if (i + j) % 2 else '-1' for j in range(3))}" for i, n in enumerate(names)]
    (root / "list_attr_celeba.txt").write_text("\n".join([str(len(names)), " ".join(attrs), *rows]) + "\n")
    (root / "list_eval_partition.txt").write_text("".join(f"{n} {i % 2}\n" for i, n in enumerate(names)))
    url = memory_store(str(root), "celeba")
    args = dict(selected_attrs=["Male", "Blond_Hair"], split="train")
    local, remote = CelebADataset(data_root=str(root), **args), CelebADataset(data_root=url, **args)
    infos = same_samples(local, remote, str(root), url)
    assert [i["img_path"] for i in infos] == [f"img_align_celeba/{n}" for n in names[::2]]  # the partition's split
    load = LoadGANImageFromFile(keys=["img"])
    np.testing.assert_array_equal(load(dict(local.get_data_info(1)))["img"], load(dict(remote.get_data_info(1)))["img"])
    memory_store.remove(f"{url}/list_eval_partition.txt")  # without it: the last num_test images are the test split
    assert len(CelebADataset(data_root=url, num_test=2, **args)) == 3
    with pytest.raises(DataFileNotFoundError, match=rf"^CelebA attribute file not found: {url}/none\.txt$"):
        CelebADataset(data_root=url, attr_file="none.txt", **args)
    with pytest.raises(DataError, match=rf"image folder not found: {url}/faces$"):
        CelebADataset(data_root=url, img_dir="faces", **args)


def test_youtube8m_feature_files_on_a_url_read_as_local_ones(tmp_path, memory_store):
    import pickle

    from video.datasets import FeatureDataset, LoadFeatures

    rng = np.random.default_rng(0)
    root = tmp_path / "yt8m"
    os.makedirs(root / "features")
    np.savez(root / "features" / "a.npz", rgb=rng.integers(0, 256, (7, 16), dtype=np.uint8),
             audio=rng.integers(0, 256, (7, 4), dtype=np.uint8))
    with open(root / "features" / "b.pkl", "wb") as f:
        pickle.dump({"rgb": rng.standard_normal((5, 16)).astype(np.float32),
                     "audio": rng.standard_normal((5, 4)).astype(np.float32)}, f)
    (root / "list.txt").write_text("a.npz 1 2\nb.pkl 0\n")
    url = memory_store(str(root), "yt8m")
    args = dict(ann_file="list.txt", data_prefix={"feature": "features"}, classes=["c0", "c1", "c2"],
                multi_label=True)
    local, remote = FeatureDataset(data_root=str(root), **args), FeatureDataset(data_root=url, **args)
    infos = same_samples(local, remote, str(root), url)
    assert [i["filename"] for i in infos] == ["features/a.npz", "features/b.pkl"]
    load = LoadFeatures(test_mode=True)
    for i in range(2):
        a, b = load(dict(local.get_data_info(i))), load(dict(remote.get_data_info(i)))
        for modality in ("rgb", "audio"):
            np.testing.assert_array_equal(a["features"][modality], b["features"][modality])
    assert b["features"]["rgb"].shape == (5, 16)
    memory_store.remove(f"{url}/features/b.pkl")
    with pytest.raises(DataError, match=rf"^feature file not found: {url}/features/b\.pkl$"):
        load(dict(remote.get_data_info(1)))
    memory_store.pipe(f"{url}/features/a.npz", b"PK\x03\x04 damaged")
    with pytest.raises(DataError, match=rf"^cannot read feature file {url}/features/a\.npz: "):
        load(dict(remote.get_data_info(0)))
    with pytest.raises(DataFileNotFoundError, match=rf"^annotation list not found: {url}/none\.txt$"):
        FeatureDataset(data_root=url, **dict(args, ann_file="none.txt"))


# ---- the same on the loopback S3 endpoint (moto): VOC, YOLO and frame folders -----------------------------------


@pytest.fixture
def s3_fresh(s3_server, monkeypatch):
    """The session's S3 server with a fresh storage registry (this test's options only)."""
    monkeypatch.delenv("OARS_STORAGE_OPTIONS", raising=False)
    monkeypatch.setattr(storage, "_registered", {})
    monkeypatch.setattr(storage, "_listings", {})
    return s3_server


def test_voc_yolo_and_frame_folders_on_s3_give_the_local_samples(demo_data, tmp_path, s3_fresh):
    from detection.datasets.voc import VOCDataset
    from detection.datasets.yolo_txt import YOLOTxtDataset
    from video.datasets.video_dataset import RawframeDataset

    opts = s3_fresh.storage_options
    voc = sets.make_voc(demo_data, str(tmp_path / "voc"))
    url = s3_fresh.upload(voc, "formats/voc")
    args = dict(ann_file="ImageSets/Main/val.txt", img_suffix=".png", classes=sets.SHAPES, test_mode=True)
    same_samples(VOCDataset(data_root=voc, **args), VOCDataset(data_root=url, storage_options=opts, **args), voc, url)

    yolo = sets.make_yolo(demo_data, str(tmp_path / "yolo"))
    url = s3_fresh.upload(yolo, "formats/yolo")
    args = dict(data_yaml="data.yaml", split="val", test_mode=True)
    same_samples(YOLOTxtDataset(data_root=yolo, **args), YOLOTxtDataset(data_root=url, storage_options=opts, **args),
                 yolo, url)

    frames = sets.make_frames(str(tmp_path / "frames"))
    url = s3_fresh.upload(frames, "formats/frames")
    args = dict(ann_file="list.txt", classes="classes.txt", filename_tmpl="img_{:05d}.png")
    remote = RawframeDataset(data_root=url, storage_options=opts, **args)
    same_samples(RawframeDataset(data_root=frames, **args), remote, frames, url)
    from video.datasets.loading import RawFrameDecode

    imgs = RawFrameDecode()(dict(remote.get_data_info(0), frame_inds=np.array([1, 4])))["imgs"]
    assert len(imgs) == 2 and imgs[0].shape == (24, 24, 3)
    missing = f"s3://{s3_fresh.bucket}/formats/no-such-voc"
    with pytest.raises(DataFileNotFoundError, match=rf"image list {missing}/ImageSets/Main/val\.txt not found"):
        VOCDataset(data_root=missing, storage_options=opts, **dict(ann_file="ImageSets/Main/val.txt",
                                                                   classes=sets.SHAPES))
    json.dumps(opts)  # the options hold no credential (they come from the environment)


def test_storage_glob_and_normpath_treat_a_url_as_a_local_path(tmp_path, memory_store):
    for rel in ("a/x_gtFine_polygons.json", "a/b/y_gtFine_polygons.json", "z_gtFine_labelIds.png", "c.json"):
        os.makedirs(os.path.dirname(tmp_path / "t" / rel), exist_ok=True)
        (tmp_path / "t" / rel).write_text("{}")
    url = memory_store(str(tmp_path / "t"), "glob")
    local = storage.glob(str(tmp_path / "t"), "*_polygons.json")
    assert [os.path.relpath(p, tmp_path / "t") for p in local] == ["a/b/y_gtFine_polygons.json",
                                                                    "a/x_gtFine_polygons.json"]
    polygons = [f"{url}/a/b/y_gtFine_polygons.json", f"{url}/a/x_gtFine_polygons.json"]
    assert storage.glob(url, "*_polygons.json") == polygons == storage.glob(url, "a/*.json")
    assert storage.glob(url, "*.png") == [f"{url}/z_gtFine_labelIds.png"] and storage.glob(url, "*.txt") == []
    assert storage.normpath("s3://b/set/sub/../x/./y") == "s3://b/set/x/y" and storage.normpath("s3://b") == "s3://b"
    assert storage.normpath("a/./b/../c") == os.path.normpath("a/./b/../c")
