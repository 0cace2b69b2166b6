"""What every oars backbone shares: frozen stages, ``norm_eval``, torchvision-style initialisation, pretrained
weights loaded when training starts, and the forward of backbones that are one ``features`` sequence."""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from oars.engine.checkpoint import CheckpointError

from ..layers import ModulatedDeformConv2d
from ..utils import check_init, freeze_module, load_pretrained, set_norm_eval

_SKIP_PRETRAINED: ContextVar[bool] = ContextVar("oars_skip_pretrained", default=False)


@contextmanager
def pretrained_weights_skipped() -> Iterator[None]:
    """Within the block, ``init_weights`` leaves pretrained files alone (resuming: the checkpoint holds every
    weight, and the pretrained file need not exist on this machine any more)."""
    token = _SKIP_PRETRAINED.set(True)
    try:
        yield
    finally:
        _SKIP_PRETRAINED.reset(token)


def init_conv_norm(module: nn.Module, leaky_slope: float = 0.0) -> None:
    """Kaiming-normal (fan_out) conv weights for a (leaky) ReLU of ``leaky_slope``, zero conv biases, norm layers
    at weight 1 / bias 0 (torchvision's initialisation; ``leaky_slope=0`` is the ReLU gain). A deformable conv's
    weight is a conv weight; its offset conv stays at zero (a regular sampling grid at the start)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, ModulatedDeformConv2d)):
            nn.init.kaiming_normal_(m.weight, a=leaky_slope, mode="fan_out", nonlinearity="leaky_relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (_BatchNorm, nn.GroupNorm)) and m.weight is not None:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in module.modules():
        if isinstance(m, ModulatedDeformConv2d):
            nn.init.zeros_(m.conv_offset.weight)
            nn.init.zeros_(m.conv_offset.bias)


class Backbone(nn.Module):
    """Base class: subclasses set ``frozen_stages`` / ``norm_eval`` and list their frozen modules; training mode
    then keeps those modules (and, with ``norm_eval``, every batch norm) in eval mode."""

    frozen_stages: int = -1
    norm_eval: bool = False

    def _frozen_modules(self) -> list[nn.Module]:
        raise NotImplementedError(f"{type(self).__name__} must list its frozen modules")

    def finish_init(self, init: dict | None, skip_prefixes: list[str], leaky_slope: float | None = 0.0) -> None:
        """The end of every backbone's ``__init__``: torchvision's conv/norm initialisation (``leaky_slope`` None:
        the subclass initialised itself), the frozen stages, and ``init`` checked and kept for
        :meth:`init_weights` (the pretrained file is read when training starts, not here: evaluation, inference
        and export of a trained model build the same backbone on machines without that file)."""
        if leaky_slope is not None:
            init_conv_norm(self, leaky_slope=leaky_slope)
        self._pretrained = (check_init(init), tuple(skip_prefixes))
        self.freeze_stages()

    def init_weights(self) -> None:
        """Load the pretrained weights of ``init`` (without the layers under ``skip_prefixes`` that this
        configuration does not build). mmengine's Runner calls it when training starts (``BaseModule.init_weights``
        reaches every child that has one); outside a Runner call it yourself.

        Raises:
            CheckpointError: the file is missing, unreadable, or fits none of the parameters; the message names
                the backbone and the ``init.checkpoint`` path.
        """
        init, skip = getattr(self, "_pretrained", (None, ()))
        if init is None or _SKIP_PRETRAINED.get():
            return
        try:
            load_pretrained(self, init, skip_prefixes=skip)
        except CheckpointError as err:
            raise CheckpointError(f"{type(self).__name__} pretrained weights (init.checkpoint): {err} (they are read "
                                  "when training starts; give an existing file, or init: null to train from "
                                  "scratch)") from None

    def freeze_stages(self) -> None:
        """Stop gradients of the frozen modules and put them in eval mode (call once, after building)."""
        for m in self._frozen_modules():
            freeze_module(m)

    def train(self, mode: bool = True) -> Backbone:
        """Switch mode, but keep frozen stages (and every BN when ``norm_eval``) in eval mode."""
        super().train(mode)
        if mode:
            for m in self._frozen_modules():
                m.eval()
            if self.norm_eval:
                set_norm_eval(self)
        return self


def forward_features(features: Sequence[nn.Module], x: Tensor,
                     out_positions: Container[int]) -> tuple[Tensor, ...]:
    """Run ``features`` in order (an ``nn.Sequential`` or a backbone's stages), returning the outputs of the layers at
    ``out_positions``."""
    outs = []
    for j, layer in enumerate(features):
        x = layer(x)
        if j in out_positions:
            outs.append(x)
    return tuple(outs)
