"""Process-group start-up that also works on CPU-only machines.

mmengine's ``init_dist('pytorch')`` calls ``torch.cuda.set_device`` unconditionally and so dies
under ``torchrun`` on a machine without a GPU. We start the group ourselves (NCCL with CUDA,
gloo without) before the Runner is built; the Runner then skips its own start-up.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from oars.errors import OarsError

LAUNCHERS = ("none", "pytorch")


def init_distributed(launcher: str) -> bool:
    """Start the default process group for ``launcher``; returns whether training is distributed."""
    if launcher not in LAUNCHERS:
        raise OarsError(f"--launcher: expected one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    if launcher == "none":
        return False
    missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise OarsError(
            f"--launcher pytorch needs the environment torchrun sets ({', '.join(missing)} missing); "
            "start with: torchrun --nproc_per_node=N tools/train.py -c CONFIG --launcher pytorch")
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            dist.init_process_group("nccl")
        else:
            dist.init_process_group("gloo")
    return True
