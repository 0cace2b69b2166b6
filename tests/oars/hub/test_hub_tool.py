"""``tools/hub.py`` as a user runs it (a subprocess, relative paths): register a local checkpoint, see it in
``list`` and ``info``, refuse to replace it silently; then load ``oars://NAME`` and refuse the file once changed."""

from __future__ import annotations

import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from demo_utils import ROOT

from oars.hub import HubError


def hub_tool(cwd, env_home, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", OARS_HOME=str(env_home), TORCH_HOME=str(env_home / "torch"))
    env.pop("OARS_HUB_URL", None)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, osp.join(ROOT, "deploy/python"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, osp.join(ROOT, "tools/hub.py"), *args], cwd=str(cwd),
                          capture_output=True, text=True, timeout=600, env=env)


def test_register_list_info_and_load(tmp_path, monkeypatch, capsys):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    torch.save({"state_dict": {"w": torch.ones(3, 4), "b": torch.zeros(4)}, "meta": {}}, work / "ckpt.pth")
    (work / "cfg.yaml").write_text("default_scope: oars\nmodel: {type: Tiny}\n")

    done = hub_tool(work, home, "register", "mine", "ckpt.pth", "--config", "cfg.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((home / "hub.json").read_text())["mine"]
    assert record["path"] == str(work / "ckpt.pth") and record["config"] == str(work / "cfg.yaml")
    assert record["num_params"] == 16 and record["task"] == "oars" and len(record["sha256"]) == 64

    again = hub_tool(work, home, "register", "mine", "ckpt.pth")
    assert again.returncode == 2 and "already registered" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr

    info = hub_tool(work, home, "info", "oars://mine")
    assert info.returncode == 0, info.stderr[-2000:]
    assert str(work / "ckpt.pth") in info.stdout and record["sha256"] in info.stdout

    # ``list`` in this process (its subprocess would import torchvision and every task again: seconds of CPU)
    monkeypatch.setenv("OARS_HOME", str(home))
    monkeypatch.setenv("TORCH_HOME", str(home / "torch"))
    spec = importlib.util.spec_from_file_location("oars_tools_hub", osp.join(ROOT, "tools", "hub.py"))
    hub_main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hub_main)
    hub_main.main(["list"])
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["oars://mine"][1:4] == ["oars", "0.0M", "yes"], rows["oars://mine"]
    assert rows["torchvision://maskrcnn_resnet50_fpn.COCO_V1"][1:] == ["detection", "44.4M", "no", "torchvision_rcnn"]
    assert rows["torchvision://resnet50.IMAGENET1K_V2"][1:4] == ["any", "25.6M", "no"]

    from oars.engine.checkpoint import load_checkpoint_file

    assert torch.equal(load_checkpoint_file("oars://mine")["state_dict"]["w"], torch.ones(3, 4))
    torch.save({"state_dict": {"w": torch.zeros(3, 4)}}, work / "ckpt.pth")  # replaced after registering
    with pytest.raises(HubError, match="changed since it was registered"):
        load_checkpoint_file("oars://mine")
