"""StarGAN (Choi et al. 2018): one generator edits face attributes, conditioned on the target attribute vector; the
engine of the attribute-editing GANs (AttGAN and STGAN subclass it)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gan.datasets.celeba import DEFAULT_ATTRS
from gan.datasets.celeba_attrs import HAIR_COLOURS, sample_target_attrs
from gan.registry import MODELS
from gan.structures import GANDataSample

from ..base_gan import BaseGAN, Tensors


def flip_one_attr(source: torch.Tensor, index: torch.Tensor, attr_names: Sequence[str]) -> torch.Tensor:
    """The papers' test edit: attribute ``index[b]`` of row b flipped (0 <-> 1); a hair colour switched on switches
    the other hair colours off (a face has one).

    Args:
        source: float [B, K] 0/1; index: int64 [B] in [0, K).
    Returns float [B, K].
    """
    k = source.shape[1]
    flip = torch.nn.functional.one_hot(index.to(source.device), k).bool()
    target = torch.where(flip, 1.0 - source, source)
    hair = torch.tensor([n in HAIR_COLOURS for n in attr_names], device=source.device)
    switched_on = hair[index.to(source.device)] & (target[flip] > 0.5)
    clear = hair[None, :] & switched_on[:, None] & ~flip
    return target.masked_fill(clear, 0.0)


@MODELS.register_module()
class StarGAN(BaseGAN):
    """Attribute editing with a conditional generator and a discriminator with a real/fake and a class head.

    Batch: ``inputs['img']`` (source faces) and ``inputs['attrs']`` (their float [B, K] 0/1 attributes, in the
    order of ``attr_names``). Each iteration's targets are the batch's attribute rows in a random order with at
    most one hair colour (:func:`sample_target_attrs`, StarGAN's rule).

    Losses (WGAN-GP; the paper's lambdas are the loss weights): D: ``-mean D_src(x) + mean D_src(G(x, c)) +
    cls_loss_d(D_cls(x), c_src) + gradient_penalty`` (lambda_gp 10 on the src head); G: ``-mean D_src(G(x, c)) +
    cls_loss_g(D_cls(G(x, c)), c) + rec_loss(G(G(x, c), c_src), x)`` (L1, lambda_rec 10; lambda_cls 1 on both).
    ``ClassificationLoss`` is BCE summed over the attributes and averaged over the batch (StarGAN's);
    ``cls_average_attrs: true`` divides it by K (the mean over attributes of AttGAN/STGAN). The discriminator
    steps every iteration, the generator every ``n_critic`` (5).

    Predict: ``fake_img`` (the edit), ``real_A`` (the source image) and the fields ``target_attrs`` /
    ``source_attrs`` (float [K], for ``AttributeAccuracy``). Targets, first found: ``inputs['target_attrs']``
    [B, K]; each sample's metainfo ``target_attrs`` ([K] values, 0/1 or intensities); else the papers' test edit,
    attribute ``sample_idx % K`` flipped (:func:`flip_one_attr`), which needs ``inputs['attrs']``.
    Export (``mode='tensor'``): ``img`` [B, 3, H, W] in [-1, 1] and ``attrs`` [B, K] float, the attributes the
    output should have (0/1) -> [B, 3, H, W] in [-1, 1].

    Args:
        attr_names: the K edited attributes, in the dataset's ``selected_attrs`` order (checked against the
            samples' metainfo ``attr_names``); K is passed to both networks (``num_attrs``).
        gradient_penalty, cls_loss_d, cls_loss_g, rec_loss: loss configs (see above).
        cls_average_attrs: classification losses averaged (true) or summed (false) over the attributes.
    """

    needs_source = False  # does the generator's code depend on the source attributes (STGAN: the difference)?

    def __init__(self, generator: dict, discriminator: dict | None = None,
                 attr_names: Sequence[str] = DEFAULT_ATTRS, gradient_penalty: dict | None = None,
                 cls_loss_d: dict | None = None, cls_loss_g: dict | None = None, rec_loss: dict | None = None,
                 cls_average_attrs: bool = False, gan_loss: dict | None = None, n_critic: int = 5,
                 **kwargs) -> None:
        if isinstance(attr_names, str) or not attr_names:
            raise ValueError(f"{type(self).__name__}.attr_names: expected a non-empty list of attribute names, got "
                             f"{attr_names!r}")
        self.attr_names = tuple(str(a) for a in attr_names)
        super().__init__(generator, discriminator, gan_loss=gan_loss or {"type": "GANLoss", "gan_type": "wgan"},
                         n_critic=n_critic, **kwargs)
        self.gradient_penalty = MODELS.build(gradient_penalty or {"type": "GradientPenaltyLoss", "loss_weight": 10.0})
        self.cls_loss_d = MODELS.build(cls_loss_d or {"type": "ClassificationLoss", "loss_weight": 1.0})
        self.cls_loss_g = MODELS.build(cls_loss_g or {"type": "ClassificationLoss", "loss_weight": 1.0})
        self.rec_loss = MODELS.build(rec_loss or {"type": "L1Loss", "loss_weight": 10.0})
        self.cls_average_attrs = bool(cls_average_attrs)

    @property
    def num_attrs(self) -> int:
        return len(self.attr_names)

    def build_networks(self, generator: dict, discriminator: dict | None) -> None:
        self.generator = MODELS.build(generator, default_args={"num_attrs": self.num_attrs})
        self.discriminator = None if discriminator is None else MODELS.build(
            discriminator, default_args={"num_attrs": self.num_attrs})

    # ---- what AttGAN / STGAN change ----------------------------------------------------------------------------
    def condition(self, source: torch.Tensor | None, target: torch.Tensor) -> torch.Tensor:
        """The generator's attribute code for an edit source -> target ([B, K] each): StarGAN's is the target."""
        return target

    def translate(self, generator: nn.Module, img: torch.Tensor, source: torch.Tensor | None, target: torch.Tensor,
                  reconstruct: bool = False) -> Tensors:
        """``fake`` = the edit; with ``reconstruct`` also ``rec`` = the fake translated back to the source
        attributes (StarGAN's cycle)."""
        out = {"fake": generator(img, self.condition(source, target))}
        if reconstruct:
            out["rec"] = generator(out["fake"], self.condition(target, source))
        return out

    # ---- training ------------------------------------------------------------------------------------------------
    def source_attrs(self, inputs: Tensors) -> torch.Tensor:
        attrs = self.require(inputs, "attrs", type(self).__name__)
        if attrs.dim() != 2 or attrs.shape[1] != self.num_attrs:
            raise ValueError(f"{type(self).__name__}: inputs['attrs'] must be [B, K={self.num_attrs}] for attr_names "
                             f"{list(self.attr_names)}, got {tuple(attrs.shape)}")
        return attrs.float()

    def check_attr_names(self, data_samples: list | None) -> None:
        """The dataset's ``attr_names`` (metainfo) must be the model's, in the same order."""
        if not data_samples or not hasattr(data_samples[0], "metainfo"):
            return
        names = data_samples[0].metainfo.get("attr_names")  # every sample of a dataset carries the same names
        if names is not None and tuple(names) != self.attr_names:
            raise ValueError(f"{type(self).__name__}: the dataset's attributes {list(names)} differ from the "
                             f"model's attr_names {list(self.attr_names)}; set the dataset's selected_attrs "
                             "and model.attr_names to the same list")

    def train_step(self, data, optim_wrapper):
        if isinstance(data, dict):
            self.check_attr_names(data.get("data_samples"))
        return super().train_step(data, optim_wrapper)

    def generate(self, inputs: Tensors) -> Tensors:
        img, source = self.require(inputs, "img", type(self).__name__), self.source_attrs(inputs)
        target = sample_target_attrs(source, self.attr_names)
        out = self.translate(self.generator, img, source, target, reconstruct=torch.is_grad_enabled())
        out["target"] = target
        return out

    def _cls(self, loss: nn.Module, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        value = loss(logits, target)
        return value / self.num_attrs if self.cls_average_attrs else value

    def discriminator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        real, source, fake = inputs["img"], self.source_attrs(inputs), outputs["fake"]
        src_real, cls_real = self.discriminator(real)
        src_fake, _ = self.discriminator(fake)
        return {"loss_disc_real": self.gan_loss(src_real, True, is_disc=True),
                "loss_disc_fake": self.gan_loss(src_fake, False, is_disc=True),
                "loss_disc_cls": self._cls(self.cls_loss_d, cls_real, source),
                "loss_gp": self.gradient_penalty(lambda x: self.discriminator(x)[0], real, fake)}

    def generator_losses(self, inputs: Tensors, outputs: Tensors) -> Tensors:
        if "rec" not in outputs:
            raise RuntimeError(f"{type(self).__name__}.generator_losses needs generate() run with gradients on")
        src_fake, cls_fake = self.discriminator(outputs["fake"])
        return {"loss_gen_adv": self.gan_loss(src_fake, True, is_disc=False),
                "loss_gen_cls": self._cls(self.cls_loss_g, cls_fake, outputs["target"]),
                "loss_rec": self.rec_loss(outputs["rec"], inputs["img"])}

    # ---- prediction and export -----------------------------------------------------------------------------------
    def predict_targets(self, inputs: Tensors, data_samples: list | None) -> torch.Tensor:
        """Target attributes [B, K] of a prediction batch (see the class docstring for the order of sources)."""
        img = self.require(inputs, "img", type(self).__name__)
        b, k, owner = img.shape[0], self.num_attrs, type(self).__name__
        if "target_attrs" in inputs:
            target = inputs["target_attrs"].float()
            if target.shape != (b, k):
                raise ValueError(f"{owner}: inputs['target_attrs'] must be [B={b}, K={k}], got {tuple(target.shape)}")
            return target
        samples = list(data_samples or [])
        given = [samples[i].metainfo.get("target_attrs") if i < len(samples) else None for i in range(b)]
        default = None
        if any(t is None for t in given):
            index = torch.tensor([int(samples[i].metainfo.get("sample_idx", i)) if i < len(samples) else i
                                  for i in range(b)]) % k
            default = flip_one_attr(self.source_attrs(inputs), index, self.attr_names)
        rows = []
        for i, t in enumerate(given):
            if t is None:
                rows.append(default[i])
                continue
            t = torch.as_tensor(t, dtype=torch.float32).reshape(-1)
            if t.numel() != k:
                raise ValueError(f"{owner}: metainfo target_attrs of sample {i} has {t.numel()} values for the "
                                 f"{k} attributes {list(self.attr_names)}")
            rows.append(t.to(img.device))
        return torch.stack(rows)

    def predict(self, inputs: Tensors, data_samples: list | None = None) -> list[GANDataSample]:
        self.check_attr_names(data_samples)
        target = self.predict_targets(inputs, data_samples)
        samples = super().predict({**inputs, "target_attrs": target}, data_samples)
        source = inputs.get("attrs")
        for i, sample in enumerate(samples):
            if "target_attrs" not in sample.metainfo:  # a metainfo target stays where it is (sample.get reads both)
                sample.set_field(target[i].detach().float().cpu(), "target_attrs")
            if source is not None:
                sample.set_field(source[i].detach().float().cpu(), "source_attrs")
        return samples

    def export_feeds(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        """``img``, ``attrs`` (the targets, ``inputs['target_attrs']``: :meth:`predict` sets them) and, when the
        generator needs them, ``src_attrs`` (the dataset's attributes)."""
        feeds = {"img": self.require(inputs, "img", type(self).__name__), "attrs": inputs["target_attrs"]}
        if self.needs_source:
            feeds["src_attrs"] = self.source_attrs(inputs)
        return feeds

    def predict_images(self, inputs: Tensors, data_samples: list | None) -> Tensors:
        feeds = self.export_feeds(inputs, data_samples)
        return {"fake_img": self.export_forward(feeds), "real_A": feeds["img"]}

    def export_forward(self, inputs: Tensors) -> torch.Tensor:
        return self.translate(self.sampling_generator, inputs["img"], inputs.get("src_attrs"), inputs["attrs"])["fake"]

    def export_inputs(self, batch: int = 1, img_size: int | tuple[int, int] = 128) -> Tensors:
        """``img`` [B, 3, H, W] zeros and ``attrs`` [B, K] 0/1 (the target attributes)."""
        h, w = self.image_size(img_size)
        attrs = (torch.arange(batch * self.num_attrs).reshape(batch, self.num_attrs) % 2).float()
        return {"img": torch.zeros(batch, 3, h, w), "attrs": attrs}
