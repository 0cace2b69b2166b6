"""FLOPs counting (oars.analysis.flops) and tools/get_flops.py: hand-counted numbers, a table that adds up, the
CLI on a demo config, clear messages for bad input."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from demo_utils import ROOT
from torch import nn

from oars.analysis.flops import OWN_SUFFIX, count_flops, format_report
from oars.cli import run_cli

sys.path.insert(0, os.path.join(ROOT, "tools"))
import get_flops  # noqa: E402

UNET_DEMO = os.path.join(ROOT, "configs", "segmentation", "unet", "unet_demo_shapes.yaml")


class ConvLinear(nn.Module):
    """conv 3->4 (3x3, pad 1) on 8x8, flatten, linear 256->5; plus a layer that never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 5)
        self.unused = nn.Linear(7, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class Nested(nn.Module):
    """Two levels of submodules, a ModuleList that never runs itself, and a matmul in the root's own forward."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU()))
        self.blocks = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in range(2)])
        self.head = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean((2, 3))) @ torch.ones(6, 3)


def test_hand_counted_conv_and_linear():
    report = count_flops(ConvLinear(), torch.randn(2, 3, 8, 8))
    # per image: conv = Cout*H*W outputs x Cin*k*k multiply-adds; linear = in x out; 2 FLOPs each, biases not counted
    conv_macs = 4 * 8 * 8 * 3 * 3 * 3
    fc_macs = 256 * 5
    assert report.flops == 2 * 2 * (conv_macs + fc_macs) == 32768
    assert report.macs == report.flops / 2
    assert report.params == (4 * 3 * 9 + 4) + (256 * 5 + 5)  # the unused layer is not charged
    assert report.model_params == report.params + 7 * 7 + 7
    rows = {r.path: r for r in report.rows}
    assert rows["conv"].flops == 2 * 2 * conv_macs and rows["fc"].flops == 2 * 2 * fc_macs
    assert "unused" not in rows
    assert report.inputs == [("input", [2, 3, 8, 8], "float32")]


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_table_adds_up_to_the_total(depth):
    report = count_flops(Nested(), torch.randn(1, 3, 6, 6))
    table = report.table(depth)
    assert table[0].path == "" and table[0].flops == report.flops > 0
    assert max(r.depth for r in table) <= depth + 1  # own rows sit one level below the row they belong to
    for i, row in enumerate(table):
        below = []
        for other in table[i + 1:]:
            if other.depth <= row.depth:
                break
            if other.depth == row.depth + 1:
                below.append(other)
        if below:
            assert sum(r.flops for r in below) == row.flops, (row, below)
    if depth >= 1:  # the root's matmul (2 * 1 * 6 * 3) is outside every submodule: its own row says so
        assert [r.flops for r in table if r.own and r.path == ""] == [2 * 6 * 3]
        blocks = next(r for r in table if r.path == "blocks")  # never ran itself; its children did
        assert blocks.flops == 2 * 2 * (8 * 6 * 6 * 8 * 9) and blocks.params == 2 * (8 * 8 * 9 + 8)
    text = format_report(report, depth=depth)
    assert "2 FLOPs per multiply-add" in text and "MACs" in text and "MMDetection" in text
    assert (OWN_SUFFIX in text) == (depth >= 1)


def test_ops_without_a_formula_are_named():
    from torchvision.ops import roi_align

    class Pool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return roi_align(x, [torch.tensor([[0.0, 0.0, 4.0, 4.0]])], 2)

    report = count_flops(Pool(), torch.randn(1, 2, 8, 8))
    assert report.flops == 0 and report.uncounted_ops == {"torchvision.roi_align": 1}
    assert "ran without a FLOP formula (not counted): torchvision.roi_align x1" in format_report(report)


def _flops_line(text: str) -> int:
    line = next(line for line in text.splitlines() if line.startswith("FLOPs: "))
    return int(line.split("(")[1].split(")")[0].replace(",", ""))


def test_cli_on_the_unet_demo_config(capsys):
    get_flops.main(["-c", UNET_DEMO, "--shape", "32", "--depth", "2"])
    small = capsys.readouterr().out
    get_flops.main(["-c", UNET_DEMO, "--shape", "64", "64", "--depth", "1"])
    large = capsys.readouterr().out
    assert "input image: [1, 3, 32, 32] float32" in small and "input image: [1, 3, 64, 64] float32" in large
    assert "MACs:" in small and "2 FLOPs per multiply-add" in small
    assert "segmentor.backbone" in small and "segmentor.backbone.encoder" not in large  # --depth
    # a fully convolutional net: twice the side, four times the FLOPs
    assert _flops_line(large) == 4 * _flops_line(small) > 0


@pytest.mark.parametrize("argv, expected", [
    (["--shape", "0"], "--shape 0: expected the input's spatial size as one positive int (square) or two (H W)"),
    (["--shape", "32", "32", "3"], "--shape 32 32 3: expected"),
    (["--shape", "big"], "--shape big: expected"),
    (["--depth", "-1"], "--depth -1: expected 0 or more levels"),
])
def test_bad_arguments_give_one_message(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: get_flops.main(["-c", UNET_DEMO, *argv]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


@pytest.mark.parametrize("config, shape, expected", [
    ("configs/gan/cgan/cgan_demo_digits.yaml", "32", "(noise [1, 100], label [1]) have no spatial axes to resize"),
    ("configs/segmentation/unet/unet_demo_shapes.yaml", "30", "EncoderDecoder does not run on image [1, 3, 30, 30]: "),
])
def test_a_shape_the_model_cannot_take_gives_one_message(config, shape, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: get_flops.main(["-c", os.path.join(ROOT, config), "--shape", shape]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_unknown_config_gives_one_message(capsys, tmp_path):
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: get_flops.main(["-c", missing]))
    assert exit_info.value.code == 2
    assert f"-c {missing}: no such config file" in capsys.readouterr().err
