"""Helpers for tests that run the shrunk demo config (importable: tests/ is on pythonpath)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_CFG = os.path.join(ROOT, "configs/segmentation/unet/unet_demo_shapes.yaml")


def demo_overrides(data_root: str, epochs: int = 1, **extra) -> list[str]:
    """Overrides that make the demo config tiny and single-process (fast, deterministic)."""
    opts = {
        "train_dataloader.dataset.data_root": data_root,
        "val_dataloader.dataset.data_root": data_root,
        "test_dataloader.dataset.data_root": data_root,
        "train_dataloader.batch_size": 4,
        "val_dataloader.batch_size": 4,
        "test_dataloader.batch_size": 4,
        "train_dataloader.num_workers": 0,
        "val_dataloader.num_workers": 0,
        "test_dataloader.num_workers": 0,
        "train_dataloader.persistent_workers": False,
        "val_dataloader.persistent_workers": False,
        "test_dataloader.persistent_workers": False,
        "model.backbone.base_channels": 4,
        "model.decode_head.channels": 4,
        "train_cfg.max_epochs": epochs,
        "train_cfg.val_interval": 1,
        "default_hooks.logger.interval": 1,
        "default_hooks.checkpoint.interval": 1,
        "default_hooks.checkpoint.max_keep_ckpts": 5,
    }
    opts.update(extra)
    return [f"{k}={v}" for k, v in opts.items()]


DET_DEMO_CFG = os.path.join(ROOT, "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml")
MASK_DEMO_CFG = os.path.join(ROOT, "configs/detection/mask_rcnn/mask_rcnn_r18_fpn_demo_shapes.yaml")


def det_demo_overrides(data_root: str, epochs: int = 1, fit_train: bool = False, **extra) -> list[str]:
    """Overrides that make the detection demo config tiny and single-process. ``fit_train`` evaluates on the
    training images (to check that the model can fit them)."""
    opts = {}
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts.update({f"{split}.dataset.data_root": data_root, f"{split}.num_workers": 0,
                     f"{split}.persistent_workers": False, f"{split}.batch_size": 4})
        if fit_train and split != "train_dataloader":
            opts.update({f"{split}.dataset.ann_file": "annotations/instances_train.json",
                         f"{split}.dataset.data_prefix.img": "images/train"})
    opts.update({
        "train_cfg.max_epochs": epochs,
        "train_cfg.val_interval": epochs,
        "default_hooks.logger.interval": 1,
        "default_hooks.checkpoint.interval": epochs,
    })
    opts.update(extra)
    return [f"{k}={v}" for k, v in opts.items()]


def run_tool(name: str, *args: str, check: bool = True, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """Run tools/<name> in a subprocess from ``cwd`` (the repository root unless told: another folder tests
    relative paths as a user types them); assert success unless ``check`` is False."""
    threads = os.environ.get("OMP_NUM_THREADS", "2")  # 1 under `make test`'s two xdist workers
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS=threads))
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def random_checkpoint(config: str, overrides: list[str], folder) -> str:
    """Random weights of ``config`` with ``overrides`` saved as ``folder/model.pth`` (what infer and export need;
    no training)."""
    import copy

    import torch
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(config, overrides)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(copy.deepcopy(cfg.model))
    classes = [f"class{i}" for i in range(cfg.model.num_classes)]
    path = os.path.join(str(folder), "model.pth")
    torch.save({"state_dict": model.state_dict(), "meta": {"dataset_meta": {"classes": classes}}}, path)
    return path


def load_tool(name: str):
    """tools/<name>.py imported as a module (its ``main``/``build_parser`` called in-process: no interpreter start)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{name}_tool", os.path.join(ROOT, "tools", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shard_config(config: str, overrides: list[str], shards: dict, work, storage_options: dict | None = None) -> str:
    """``config`` (with ``overrides``) with each split's dataset read from ``shards`` (split -> folder or URL), as
    the YAML file ``<work>/shards.yaml``: what a user's config says (a shuffle buffer of 4 for training)."""
    import copy

    from oars.config.check import load_checked_config

    cfg = load_checked_config(config, overrides)
    for split, root in shards.items():
        loader = cfg[f"{split}_dataloader"]
        ds = {"type": "ShardDataset", "shards": root, "pipeline": copy.deepcopy(loader.dataset.pipeline)}
        if storage_options:
            ds["storage_options"] = dict(storage_options)
        ds.update({"shuffle_buffer": 4} if split == "train" else {"test_mode": True})
        loader.dataset = ds
        loader.sampler = None
    path = os.path.join(str(work), "shards.yaml")
    cfg.dump(path)
    return path
