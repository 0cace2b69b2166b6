"""One optimizer wrapper per GAN network: ``optim_wrapper: {constructor: MultiOptimWrapperConstructor, generator:
{optimizer: ...}, discriminator: {optimizer: ...}}`` -> an :class:`OptimWrapperDict` keyed like the config.

mmengine builds an ``OptimWrapperDict`` only from already-built wrappers; a config dict of several wrappers needs
a constructor, which mmengine itself does not ship (MMagic has one). This one gives each key the parameters of
the model's submodule of that name (``model.generator``, ``model.discriminator``; CycleGAN keeps both of its
generators under ``generator`` and both discriminators under ``discriminator``), built with mmengine's
``DefaultOptimWrapperConstructor`` (so ``paramwise_cfg`` works per key).
"""

from __future__ import annotations

import copy

from mmengine.optim import DefaultOptimWrapperConstructor, OptimWrapperDict
from torch import nn

from gan.registry import OPTIM_WRAPPER_CONSTRUCTORS


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class MultiOptimWrapperConstructor:
    """Build ``{name: OptimWrapper}`` for ``model.<name>`` for every key of ``optim_wrapper_cfg``.

    A top-level ``type`` (what ``--amp`` sets: ``MixedPrecisionOptimWrapper``) becomes every wrapper's default type;
    a wrapper's own ``type`` wins. ``paramwise_cfg`` is ``{name: paramwise_cfg}``.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None) -> None:
        if not isinstance(optim_wrapper_cfg, dict):
            raise TypeError(f"optim_wrapper: expected a mapping of wrappers, got {type(optim_wrapper_cfg).__name__}")
        cfg = copy.deepcopy(dict(optim_wrapper_cfg))
        default_type = cfg.pop("type", None)
        bad = [k for k, v in cfg.items() if not isinstance(v, dict) or "optimizer" not in v]
        if bad or not cfg:
            raise ValueError(f"optim_wrapper: every key must name a network with its own wrapper such as "
                             f"generator: {{optimizer: {{type: Adam, lr: 0.0002}}}}; bad keys: {bad or '(none given)'}")
        paramwise_cfg = dict(paramwise_cfg or {})
        unknown = sorted(set(paramwise_cfg) - set(cfg))
        if unknown:
            raise ValueError(f"optim_wrapper.paramwise_cfg: keys {unknown} are not optimizer keys {sorted(cfg)}")
        self.constructors = {}
        for name, wrapper in cfg.items():
            if default_type is not None:
                wrapper.setdefault("type", default_type)
            self.constructors[name] = DefaultOptimWrapperConstructor(wrapper, paramwise_cfg.get(name))

    def __call__(self, model: nn.Module) -> OptimWrapperDict:
        module = getattr(model, "module", model)  # a DDP wrapper holds the model as .module
        wrappers = {}
        for name, constructor in self.constructors.items():
            part = getattr(module, name, None)
            if not isinstance(part, nn.Module):
                parts = sorted(n for n, _ in module.named_children())
                raise ValueError(f"optim_wrapper.{name}: {type(module).__name__} has no submodule {name!r}; "
                                 f"optimizer keys name the networks they train, one of {parts}")
            wrappers[name] = constructor(part)
        return OptimWrapperDict(**wrappers)
