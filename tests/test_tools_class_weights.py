"""tools/class_weights.py: median-frequency weights of a tiny label set against a hand computation, the errors it
explains, and one run as a user runs it (subprocess, relative paths)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml
from demo_utils import load_tool
from PIL import Image

from oars.config import load_config
from oars.errors import DataError
from segmentation.datasets.class_frequency import UnseenClassWarning, class_frequency, label_sources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "class_weights.py")

# three 4x4 label maps (16 px): 0 bg, 1 a, 2 b, 255 ignored; class 3 (c) never appears
LABELS = {
    "0000": [0] * 10 + [1] * 6,
    "0001": [0] * 8 + [1] * 2 + [2] * 2 + [255] * 4,
    "0002": [1] * 16,
}
CONFIG = """\
train_dataloader:
  batch_size: 2
  dataset:
    type: SegDataset
    data_root: data
    img_dir: images
    ann_dir: labels
    img_suffix: .png
    classes: [bg, a, b, c]
    pipeline:
      - {type: LoadImageFromFile}
      - {type: LoadSegAnnotations}
      - {type: PackSegInputs}
"""



def make_set(root) -> str:
    for sub in ("images", "labels"):
        os.makedirs(root / "data" / sub)
    for name, values in LABELS.items():
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(root / "data" / "images" / f"{name}.png")
        label = Image.fromarray(np.array(values, np.uint8).reshape(4, 4), mode="L")
        label.save(root / "data" / "labels" / f"{name}.png")
    (root / "cfg.yaml").write_text(CONFIG)
    return str(root / "cfg.yaml")


def printed_weights(stdout: str) -> list[float]:
    """class_weight of the printed YAML snippet (one loss dict, or the entry of a loss list that has it)."""
    snippet = stdout[stdout.index("model:"):].split("\n# or on the command line")[0]
    losses = yaml.safe_load(snippet)["model"]["decode_head"]["loss_decode"]
    if isinstance(losses, list):
        (losses,) = [loss for loss in losses if "class_weight" in loss]
    return losses["class_weight"]


def test_median_frequency_weights_errors_and_reduce_zero_label(tmp_path, capsys):
    cfg = make_set(tmp_path)
    tool = load_tool('class_weights')
    tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}"])
    out, err = capsys.readouterr()
    assert "warning: class 'c' has no labelled pixel in the 3 label maps counted; its weight is 0" in err
    # pixels bg 18, a 24, b 2; labelled pixels of the images holding them: bg 16 + 12, a 16 + 12 + 16, b 12
    freq = np.array([18 / 28, 24 / 44, 2 / 12])
    expected = list(np.median(freq) / freq) + [0.0]
    np.testing.assert_allclose(printed_weights(out), expected, atol=5e-5)
    assert re.search(r"^c\s+0\s+-\s+0\.0000$", out, re.M)  # the table row of the unseen class
    assert re.search(r"^b\s+2\s+0\.1667\s+" + f"{np.median(freq) / freq[2]:.4f}$", out, re.M)
    assert 'class_weight="[' in out  # the -o form too
    # reduce_zero_label: 0 -> ignored, a -> 0, b -> 1; a: 24 px of 6 + 4 + 16 labelled, b: 2 of 4
    # and a model whose loss_decode is a list: the weights go on its CrossEntropyLoss entry (index 1), and the
    # printed -o form is a key the config loader accepts
    losses = "model.decode_head.loss_decode=[{type: DiceLoss}, {type: CrossEntropyLoss, loss_weight: 0.5}]"
    tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}", losses,
               "train_dataloader.dataset.reduce_zero_label=true", "train_dataloader.dataset.classes=[x, y, z]"])
    out, err = capsys.readouterr()
    assert "warning: class 'z' has no labelled pixel" in err
    freq = np.array([24 / 26, 2 / 4])
    np.testing.assert_allclose(printed_weights(out), list(np.median(freq) / freq) + [0.0], atol=5e-5)
    assert "- {type: CrossEntropyLoss, loss_weight: 0.5, class_weight: [" in out
    override = out.split("# or on the command line: -o ")[1].strip().replace('"', "")
    loaded = load_config(cfg, [losses, override]).model.decode_head.loss_decode
    assert loaded[0] == {"type": "DiceLoss"} and loaded[1]["class_weight"] == printed_weights(out)
    # the library warns with a category of its own
    sources = label_sources(load_config(cfg, [f"train_dataloader.dataset.data_root={tmp_path / 'data'}"]))
    with pytest.warns(UnseenClassWarning, match="class 'c'"):
        result = class_frequency(sources, progress=False)
    assert result.pixels.tolist() == [18, 24, 2, 0] and result.image_pixels.tolist() == [28, 44, 12, 0]
    # --ignore-index replaces the dataset's: with 0 ignored, the 255 pixels are out of range
    with pytest.raises(DataError, match=r"0001.png: label values \[255\] are out of range; .* or ignore_index 0"):
        tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}",
                   "--ignore-index", "0", "--split", "train"])
    # a config without the split's dataset
    with pytest.raises(DataError, match="has no val_dataloader.dataset"):
        tool.main(["-c", cfg, "--split", "val"])
    # a label value outside the classes and a label file that is not an image: the file is named
    label = tmp_path / "data" / "labels" / "0001.png"
    Image.fromarray(np.full((4, 4), 7, np.uint8), mode="L").save(label)
    with pytest.raises(DataError, match=rf"{label}: label values \[7\] are out of range"):
        tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}"])
    label.write_bytes(b"not a png")
    with pytest.raises(DataError, match=rf"could not read label map .*: {label}"):
        tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}", "--num-workers", "1"])
    # a missing label map: the dataset names it when it lists the files
    label.unlink()
    with pytest.raises(FileNotFoundError, match=rf"label map {label} not found"):
        tool.main(["-c", cfg, "-o", f"train_dataloader.dataset.data_root={tmp_path / 'data'}"])


@pytest.mark.slow  # one subprocess: importing torch, torchvision and albumentations takes 5-20 s on a shared machine
def test_class_weights_as_a_user_runs_it(tmp_path):
    make_set(tmp_path)
    proc = subprocess.run([sys.executable, TOOL, "-c", "cfg.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    freq = np.array([18 / 28, 24 / 44, 2 / 12])
    np.testing.assert_allclose(printed_weights(proc.stdout), list(np.median(freq) / freq) + [0.0], atol=5e-5)
    assert "3/3" in proc.stderr and "image" in proc.stderr  # the progress bar over images
    assert "warning: class 'c' has no labelled pixel" in proc.stderr and "Traceback" not in proc.stderr
