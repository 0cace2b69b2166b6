"""Channels-last training: the ``channels_last`` config key (``tools/train.py --channels-last``).

``channels_last: true`` stores every 4-D parameter and buffer of the model (the 2-D convolutions' weights) in the
channels-last memory format (NHWC strides; the shape stays ``[O, I, kH, kW]``) when training starts. A convolution
whose weight is channels-last gives a channels-last output, so the feature maps of the whole network follow without
any change to the model's code, and oneDNN (CPU) runs its NHWC kernels without reordering every input and weight
at every call (cuDNN has NHWC kernels too; unmeasured here, no GPU was available).

Why a switch and not the default: the gain is large for full-size convolution networks (a ResNet-50 training step at
8 x 224 px on 2 CPU threads: 0.84 of the contiguous one with benchmarks/compile_step.py ``--channels-last``, 0.75 in
a run with two models in the process) and nothing for the tiny demo networks; compiled, it made DeepLabV3 and
pix2pix slower (docs/compression.md); and it changes the rounding of the convolutions. The checkpoint holds
the same values as ever: loading it into a contiguous model (evaluation, export, the predictors) copies values, not
strides.

One known oneDNN bug stands in the way on the CPU (oneDNN issue #6035, open; measured on torch 2.14.1): the weight
gradient of a 1 x 1 convolution with a stride above 1 and fewer than 16 input channels per group, on a channels-last
input, writes past its buffer: wrong gradients, a crash, or a corrupted heap (``free(): invalid next size``). Full-
size networks have no such layer (their strided 1 x 1 shortcuts take 64 channels or more); shrunk ones and narrow
custom ones do. :func:`channels_last_blockers` names them, and the runner then trains contiguous and says why.
"""

from __future__ import annotations

from typing import Any

import torch
from mmengine.config import Config

from oars.config import cfg_provenance, source_of
from oars.config.resolved import record
from oars.errors import OarsError


def channels_last_value(value: Any, where: str = "<config>") -> bool:
    """The ``channels_last`` key's value as a bool (absent: False).

    Raises:
        OarsError: anything but true, false or nothing, naming ``where`` (the file or flag that set it).
    """
    if value is None:
        return False
    if not isinstance(value, bool):
        raise OarsError(f"{where}: channels_last: expected true or false, got {value!r}")
    return value


def resolve_channels_last(cfg: Config, flag: bool) -> None:
    """Apply ``--channels-last`` to ``cfg`` (``channels_last: true``, recorded) and check the key's value.

    Raises:
        OarsError: a value that is not a bool (:func:`channels_last_value`), naming the file that set it.
    """
    where = source_of(cfg_provenance(cfg), "channels_last") or cfg.filename or "<config>"
    channels_last_value(cfg.get("channels_last"), where)
    if flag and cfg.get("channels_last") is not True:
        cfg.channels_last = True
        record(cfg, "channels_last", True, "--channels-last flag")


# oneDNN's input-channel block on AVX-512 (8 on AVX2): below it the strided 1 x 1 weight gradient is broken
ONEDNN_MIN_CHANNELS = 16


def channels_last_blockers(model: torch.nn.Module) -> list[str]:
    """The 2-D convolutions of ``model`` that must not see a channels-last input on the CPU.

    Why: oneDNN issue #6035 (see the module's docstring): a 1 x 1 convolution with a stride above 1 and fewer than
    :data:`ONEDNN_MIN_CHANNELS` input channels per group computes its weight gradient out of bounds on a
    channels-last input. Only convolutions whose weight is on the CPU and trained (``requires_grad``) are named.

    Args:
        model: any module.

    Returns:
        ``"name (1x1, stride (2, 2), 8 input channels per group)"`` for each such convolution, in module order.
    """
    found = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Conv2d) or module.weight.device.type != "cpu":
            continue
        per_group = module.in_channels // module.groups
        if (tuple(module.kernel_size) == (1, 1) and tuple(module.stride) != (1, 1)
                and per_group < ONEDNN_MIN_CHANNELS and module.weight.requires_grad):
            found.append(f"{name} (1x1, stride {tuple(module.stride)}, {per_group} input channels per group)")
    return found


def apply_channels_last(model: torch.nn.Module) -> tuple[int, list[str]]:
    """Store ``model`` channels-last (:func:`to_channels_last`) unless a layer blocks it
    (:func:`channels_last_blockers`): what the runner and benchmarks/compile_step.py do for ``channels_last: true``.

    Returns:
        ``(count, blockers)``: the 4-D tensors converted (0 when blocked) and the blocking layers (empty when applied).
    """
    blockers = channels_last_blockers(model)
    return (0, blockers) if blockers else (to_channels_last(model), [])


def blocked_message(blockers: list[str]) -> str:
    """The log's warning when :func:`channels_last_blockers` kept a model contiguous, naming the first layer."""
    more = f" and {len(blockers) - 1} more" if len(blockers) > 1 else ""
    return (f"channels_last: not applied, training stays contiguous: {blockers[0]}{more} would get wrong weight "
            "gradients on a channels-last input on the CPU (oneDNN issue #6035: a strided 1x1 convolution with fewer "
            "than 16 input channels per group)")


def to_channels_last(model: torch.nn.Module) -> int:
    """Store ``model``'s 4-D parameters and buffers channels-last, in place.

    Why not ``Module.to(memory_format=...)``: it refuses a model with a 5-D tensor (a 3-D convolution, as in
    R(2+1)D or Non-local), which channels-last does not apply to. Why in place: the optimizer, the EMA copy's update
    and the wrappers (DDP) hold references to the parameters; only each tensor's data changes.

    Args:
        model: any module (a model wrapper too). Tensors of another rank (linear, 1-D, 3-D convolutions, norms)
            are left as they are.

    Returns:
        How many 4-D tensors it holds (parameters and buffers, each counted once), all channels-last afterwards.
    """
    seen: set[int] = set()
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.dim() == 4 and id(tensor) not in seen:
            seen.add(id(tensor))
            tensor.data = tensor.data.contiguous(memory_format=torch.channels_last)
    return len(seen)
