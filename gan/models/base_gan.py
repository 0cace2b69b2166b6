"""The GAN training engine: alternating discriminator / generator steps on an ``OptimWrapperDict``.

Every GAN of the task subclasses :class:`BaseGAN` and writes only its forward pieces (``generate``,
``discriminator_losses``, ``generator_losses``, ``predict_images``, ``export_forward``, ``export_inputs``); the step
order, the cadence, freezing, EMA, the non-finite check and the data samples live here once.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from mmengine.model import BaseModel
from mmengine.optim import OptimWrapperDict
from torch import nn

from gan.registry import MODELS
from gan.structures import GANDataSample
from oars.engine.hooks.nan_guard_hook import NonFiniteLossError

from .utils import GeneratorEMA, requires_grad_off

Tensors = dict[str, torch.Tensor]
EMA_KEYS = ("momentum", "start_iter", "interval")


def _init_module(module: nn.Module) -> None:
    """Call ``init_weights`` of ``module`` or, for containers (ModuleDict), of each child."""
    if hasattr(module, "init_weights"):
        module.init_weights()
    else:
        for child in module.children():
            _init_module(child)


class BaseGAN(BaseModel):
    """A generator, a discriminator (``None``: inference only) and the training step of both.

    ``train_step``: the generator forward (``generate``) runs once per iteration; the discriminator step (its
    optimizer key ``discriminator``) runs every iteration on the detached fakes with the generator's gradients off;
    the generator step (key ``generator``) runs every ``n_critic``-th iteration with the discriminator's gradients
    off (its ``.grad`` stays empty: nothing leaks into its next step). The iteration counter is the buffer
    ``train_iter`` (saved in checkpoints, so the cadence and EMA start survive a resume). A non-finite loss term
    (without an FP16 loss scaler, which skips such steps itself) stops training before the step is applied, naming
    the iteration and the term.

    EMA (``ema_config: {momentum: 0.999, start_iter: 0, interval: 1}``): ``generator_ema`` averages the generator
    after each generator step (see :class:`GeneratorEMA`); prediction and ``mode='tensor'`` (export) use it.

    Args:
        generator, discriminator: network configs (built from ``gan.registry.MODELS``).
        gan_loss: adversarial loss config (``GANLoss``).
        n_critic: discriminator steps per generator step (WGAN: 5).
        ema_config: generator EMA settings, or None.
        data_preprocessor: defaults to ``GANDataPreprocessor`` (0..255 -> [-1, 1]).
    """

    #: prediction fields that come from a network the export does not hold (CycleGAN's other direction):
    #: ``tools/eval.py --model-dir`` leaves them out instead of filling them from untrained weights
    unexported_fields: tuple[str, ...] = ()

    def __init__(self, generator: dict, discriminator: dict | None = None, gan_loss: dict | None = None,
                 n_critic: int = 1, ema_config: dict | None = None, data_preprocessor: dict | nn.Module | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = {"type": "GANDataPreprocessor"}
        if isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if isinstance(n_critic, bool) or not isinstance(n_critic, int) or n_critic < 1:
            raise ValueError(f"{type(self).__name__}.n_critic: expected a whole number >= 1, got {n_critic!r}")
        self.n_critic = n_critic
        self.build_networks(generator, discriminator)
        self.gan_loss = MODELS.build(gan_loss or {"type": "GANLoss"})
        self.register_buffer("train_iter", torch.zeros((), dtype=torch.long))
        self.generator_ema: GeneratorEMA | None = None
        if ema_config is not None:
            unknown = sorted(set(ema_config) - set(EMA_KEYS))
            if unknown:
                raise ValueError(f"{type(self).__name__}.ema_config: unknown keys {unknown}; "
                                 f"accepted: {list(EMA_KEYS)}")
            self.generator_ema = GeneratorEMA(self.generator, **ema_config)

    # ---- pieces a subclass provides -------------------------------------------------------------------------
    def build_networks(self, generator: dict, discriminator: dict | None) -> None:
        """Set ``self.generator`` and ``self.discriminator`` (override to pass arguments down or build pairs)."""
        self.generator = MODELS.build(generator)
        self.discriminator = None if discriminator is None else MODELS.build(discriminator)

    def generate(self, inputs: Tensors) -> Tensors:
        """The training generator's outputs for a batch (with a graph when the generator steps this iteration)."""
        raise NotImplementedError

    def discriminator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        """Discriminator loss terms (keys containing ``loss``); ``outputs`` are detached."""
        raise NotImplementedError

    def generator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        """Generator loss terms (keys containing ``loss``)."""
        raise NotImplementedError

    def predict_images(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """Data-sample field -> [B, C, H, W] image in [-1, 1] (``fake_img`` and the real copies)."""
        raise NotImplementedError

    def export_feeds(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """What :meth:`predict_images` gives :meth:`export_forward` for ``fake_img``: the graph's inputs (keys as
        :meth:`export_inputs`; images normalised, as the data preprocessor leaves them) for a prediction batch.

        Why one method: prediction and the evaluation of an export (``tools/eval.py --model-dir``, which runs the
        graph in place of :meth:`export_forward`) then feed the generator the same noise, labels, images and
        target attributes, so their metrics compare the networks and nothing else."""
        raise NotImplementedError

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        """The exported graph: inputs as :meth:`export_inputs` describes -> generated images [B, C, H, W] in [-1, 1]
        (raw tanh range; ``(x + 1) * 127.5`` gives 0..255 RGB)."""
        raise NotImplementedError

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 256) -> Tensors:
        """Example graph inputs for the exporter: name -> tensor (noise [B, Z], label [B] int64, img [B,3,H,W])."""
        raise NotImplementedError

    # ---- the engine -----------------------------------------------------------------------------------------
    @property
    def sampling_generator(self) -> nn.Module:
        """The generator used for prediction and export: the EMA one when configured."""
        return self.generator if self.generator_ema is None else self.generator_ema.module

    def init_weights(self) -> None:
        """Each network's own initialisation (N(0, 0.02) and its pretrained file), then the EMA copies the result."""
        for name, child in self.named_children():
            if name != "generator_ema":
                _init_module(child)
        if self.generator_ema is not None:
            self.generator_ema.sync(self.generator)

    def train_step(self, data: dict | tuple | list, optim_wrapper: OptimWrapperDict) -> dict[str, torch.Tensor]:
        """One training iteration (see the class docstring); returns the logged loss terms and totals."""
        wrappers = self._wrappers(optim_wrapper)
        d_wrapper, g_wrapper = wrappers["discriminator"], wrappers["generator"]
        data = self.data_preprocessor(data, True)
        inputs = data["inputs"]
        it = int(self.train_iter)
        g_step = (it + 1) % self.n_critic == 0
        with g_wrapper.optim_context(self.generator), torch.set_grad_enabled(g_step):
            outputs = self.generate(inputs)
        detached = {k: v.detach() for k, v in outputs.items()}
        with requires_grad_off(self.generator), d_wrapper.optim_context(self.discriminator):
            d_losses = self.discriminator_losses(inputs, detached)
        d_total, log_vars = self._total(d_losses, "loss_disc", it, d_wrapper)
        d_wrapper.update_params(d_total)
        if g_step:
            with requires_grad_off(self.discriminator), g_wrapper.optim_context(self.generator):
                g_losses = self.generator_losses(inputs, outputs)
            g_total, g_log = self._total(g_losses, "loss_gen", it, g_wrapper)
            g_wrapper.update_params(g_total)
            log_vars.update(g_log)
            if self.generator_ema is not None:
                self.generator_ema.update(self.generator, it)
        self.train_iter += 1
        return log_vars

    def _wrappers(self, optim_wrapper: Any) -> OptimWrapperDict:
        if not isinstance(optim_wrapper, OptimWrapperDict):
            raise TypeError(f"{type(self).__name__}.train_step needs an OptimWrapperDict with 'generator' and "
                            "'discriminator' (optim_wrapper: {constructor: MultiOptimWrapperConstructor, generator: "
                            "{optimizer: ...}, discriminator: {optimizer: ...}}), got "
                            f"{type(optim_wrapper).__name__}")
        missing = [k for k in ("generator", "discriminator") if k not in optim_wrapper.optim_wrappers]
        if missing:
            raise ValueError(f"{type(self).__name__}: optim_wrapper has no {missing} (keys: "
                             f"{sorted(optim_wrapper.optim_wrappers)})")
        return optim_wrapper

    def _total(self, losses: Tensors, name: str, it: int, wrapper: Any) -> tuple[torch.Tensor, dict]:
        """Sum of the terms, the log dict (terms + ``name`` total, detached floats as tensors), checked finite."""
        terms = {k: v for k, v in losses.items() if "loss" in k}
        total = sum(terms.values())
        log = {k: v.detach() for k, v in terms.items()}
        log[name] = total.detach()
        if getattr(wrapper, "loss_scaler", None) is None:  # FP16: the scaler skips such steps, NaNGuardHook counts
            bad = {k: float(v) for k, v in log.items() if k != name and not math.isfinite(float(v))}
            if bad:
                step = "discriminator" if name == "loss_disc" else "generator"
                listed = ", ".join(f"{k}={v}" for k, v in bad.items())
                raise NonFiniteLossError(
                    f"{type(self).__name__}: loss became non-finite at iteration {it + 1} in the {step} step, first "
                    f"in {next(iter(bad))}: {listed}. The step was not applied. Lower the learning rate, add "
                    "gradient clipping (optim_wrapper.<network>.clip_grad.max_norm) or check the data.")
        return total, log

    def forward(self, inputs: Tensors, data_samples: list | None = None, mode: str = "tensor"):
        """``tensor``: :meth:`export_forward`; ``predict``: list of :class:`GANDataSample`; ``loss``: every loss
        term of both networks on this batch (no update; validation losses and shape checks)."""
        if mode == "tensor":
            return self.export_forward(inputs)
        if mode == "predict":
            return self.predict(inputs, data_samples)
        if mode == "loss":
            outputs = self.generate(inputs)
            losses = dict(self.discriminator_losses(inputs, {k: v.detach() for k, v in outputs.items()}))
            losses.update(self.generator_losses(inputs, outputs))
            return losses
        raise ValueError(f"{type(self).__name__}.forward: mode must be 'tensor', 'predict' or 'loss', got {mode!r}")

    @torch.no_grad()
    def predict(self, inputs: Tensors, data_samples: list | None = None) -> list[GANDataSample]:
        """The data samples (new ones when None) with ``fake_img`` and the real copies, float32 0..255 on the CPU."""
        images = self.predict_images(inputs, data_samples)
        batch = next(iter(images.values())).shape[0]
        samples = list(data_samples) if data_samples is not None else [GANDataSample() for _ in range(batch)]
        for key, value in images.items():
            value = self.data_preprocessor.destruct(value).cpu()
            for sample, image in zip(samples, value):
                sample.set_field(image, key)
        return samples

    # ---- helpers for subclasses -----------------------------------------------------------------------------
    @staticmethod
    def batch_size(inputs: Tensors) -> int:
        for value in inputs.values():
            if isinstance(value, torch.Tensor):
                return int(value.shape[0])
        raise ValueError(f"cannot tell the batch size from inputs with keys {sorted(inputs)}")

    @staticmethod
    def require(inputs: Tensors, key: str, owner: str) -> torch.Tensor:
        if key not in inputs:
            raise ValueError(f"{owner}: the batch has no inputs['{key}'] (keys: {sorted(inputs)}); the dataset "
                             f"pipeline's PackGANInputs must pack it")
        return inputs[key]

    @staticmethod
    def image_size(img_size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
        if isinstance(img_size, int):
            return img_size, img_size
        h, w = img_size
        return int(h), int(w)
