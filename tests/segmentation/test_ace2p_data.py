"""Human-parsing data: the LIP layout (LIPDataset, HumanParsingDataset for CIHP / ATR), its palette, and the
generated stick figures of the ACE2P demo (segmentation.demo_figures, tools/demo_data.py figures)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from demo_utils import load_tool
from PIL import Image

from oars.errors import DataError, DataFileNotFoundError, OarsError
from segmentation.datasets import HumanParsingDataset, LIPDataset
from segmentation.datasets.lip import LIP_CLASSES, parsing_palette
from segmentation.demo_figures import CLASSES, FLIP_PAIRS, generate, mirror, render_figure
from segmentation.flip_pairs import swap_label_pairs


def _lip_folder(root, split: str, ids: list[str], num_classes: int = 20) -> None:
    (root / f"{split}_images").mkdir(parents=True)
    (root / f"{split}_segmentations").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ids:
        cv2.imwrite(str(root / f"{split}_images" / f"{name}.jpg"), rng.integers(0, 256, (12, 10, 3), np.uint8))
        Image.fromarray(rng.integers(0, num_classes, (12, 10), np.uint8)).save(root / f"{split}_segmentations" /
                                                                               f"{name}.png")
    (root / f"{split}_id.txt").write_text("".join(f"{n}\n" for n in ids))


def test_lip_dataset_reads_the_lip_layout(tmp_path):
    _lip_folder(tmp_path, "train", ["77_471474", "100034_483681"])
    _lip_folder(tmp_path, "val", ["1"])
    pipeline = [{"type": "LoadImageFromFile"}, {"type": "LoadSegAnnotations"}, {"type": "PackSegInputs"}]
    ds = LIPDataset(data_root=str(tmp_path), pipeline=pipeline)
    assert len(ds) == 2 and ds.metainfo["classes"] == LIP_CLASSES
    assert ds.metainfo["classes"][14:20] == ("Left-arm", "Right-arm", "Left-leg", "Right-leg", "Left-shoe",
                                            "Right-shoe")
    assert ds.metainfo["flip_pairs"] == [[14, 15], [16, 17], [18, 19]]
    assert ds.metainfo["palette"][:3] == [[0, 0, 0], [128, 0, 0], [0, 128, 0]]
    assert ds.get_data_info(0)["img_path"].endswith("train_images/77_471474.jpg")
    sample = ds[1]["data_samples"]
    assert sample.gt_sem_seg.data.shape == (1, 12, 10)
    val = LIPDataset(data_root=str(tmp_path), split="val_id.txt", img_dir="val_images", ann_dir="val_segmentations",
                     test_mode=True)
    assert len(val) == 1
    with pytest.raises(DataFileNotFoundError, match="test_id.txt"):
        LIPDataset(data_root=str(tmp_path), split="test_id.txt")


def test_lip_labels_out_of_range_name_the_file(tmp_path):
    _lip_folder(tmp_path, "train", ["a"], num_classes=20)
    Image.fromarray(np.full((12, 10), 20, np.uint8)).save(tmp_path / "train_segmentations" / "a.png")
    ds = LIPDataset(data_root=str(tmp_path), pipeline=[{"type": "LoadImageFromFile"},
                                                         {"type": "LoadSegAnnotations"}])
    with pytest.raises(DataError, match=r"a\.png: label values \[20\]"):
        ds[0]


def test_generic_parsing_dataset_takes_its_classes_and_pairs(tmp_path):
    _lip_folder(tmp_path, "train", ["a"], num_classes=18)
    atr = ["Background", "Hat", "Hair", "Sunglasses", "Upper-clothes", "Skirt", "Pants", "Dress", "Belt", "Left-shoe",
           "Right-shoe", "Face", "Left-leg", "Right-leg", "Left-arm", "Right-arm", "Bag", "Scarf"]
    ds = HumanParsingDataset(data_root=str(tmp_path), classes=atr, flip_pairs=[[9, 10], [12, 13], [14, 15]])
    assert ds.metainfo["flip_pairs"] == [[9, 10], [12, 13], [14, 15]]
    assert ds.metainfo["palette"] == parsing_palette(18)
    with pytest.raises(DataError, match="needs classes"):
        HumanParsingDataset(data_root=str(tmp_path))
    with pytest.raises(DataError, match="num_classes=18"):
        HumanParsingDataset(data_root=str(tmp_path), classes=atr, flip_pairs=[[14, 18]])


def test_parsing_palette_is_the_voc_colour_map():
    palette = parsing_palette(20)
    assert palette[14:16] == [[64, 128, 128], [192, 128, 128]] and palette[19] == [128, 192, 0]
    assert len({tuple(c) for c in palette}) == 20


# ------------------------------------------------------------------------------------------- demo figures
def test_figures_tell_left_from_right_only_by_the_facing():
    """Front views put the figure's left limbs on the image's right, back views on its left; a mirror copy
    exchanges the labels so that the rule still holds."""
    sides = {True: 0, False: 0}
    for i in range(12):
        img, label = render_figure(np.random.default_rng([0, 0, i]), 96)
        assert set(np.unique(label)) == set(range(len(CLASSES)))
        xs = {c: np.nonzero(label == c)[1].mean() for c in (3, 4)}
        left_on_right = xs[3] > xs[4]
        sides[left_on_right] += 1
        m_img, m_label = mirror(img, label)
        np.testing.assert_array_equal(m_img, img[:, ::-1])
        np.testing.assert_array_equal(m_label, swap_label_pairs(label[:, ::-1].copy(), FLIP_PAIRS))
        m_xs = {c: np.nonzero(m_label == c)[1].mean() for c in (3, 4)}
        assert (m_xs[3] > m_xs[4]) == left_on_right  # a mirrored front view is a front view
    assert sides[True] > 0 and sides[False] > 0  # both facings occur


def test_figures_set_is_written_in_lip_layout_and_reused(tmp_path):
    out = tmp_path / "figs"
    res = generate(out, num_train=4, num_val=2, size=64)
    assert not res["skipped"] and res["num_images"] == {"train": 4, "val": 2}
    assert (out / "train_id.txt").read_text().split() == ["0000", "0001", "0002", "0003"]
    labels = [np.array(Image.open(out / "train_segmentations" / f"000{i}.png")) for i in (0, 1)]
    np.testing.assert_array_equal(labels[1], swap_label_pairs(labels[0][:, ::-1].copy(), FLIP_PAIRS))
    ds = HumanParsingDataset(data_root=str(out), img_suffix=".png", classes=CLASSES, flip_pairs=FLIP_PAIRS)
    assert len(ds) == 4
    assert generate(out, num_train=4, num_val=2, size=64)["skipped"]
    with pytest.raises(ValueError, match="num_train must be even"):
        generate(tmp_path / "odd", num_train=3)


def test_demo_data_tool_writes_figures_and_refuses_a_foreign_folder(tmp_path, monkeypatch, capsys):
    """``tools/demo_data.py figures`` as users call it (its ``main``, in-process: a subprocess start costs tens of
    seconds on a busy machine), from another folder with a relative ``--out``."""
    tool = load_tool("demo_data")
    monkeypatch.chdir(tmp_path)
    tool.main(["figures", "--out", "figs", "--num-train", "2", "--num-val", "2"])
    assert "demo_figures: wrote figs" in capsys.readouterr().out and (tmp_path / "figs" / "val_id.txt").is_file()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(OarsError, match="other"):
        tool.main(["figures", "--out", "other"])
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
