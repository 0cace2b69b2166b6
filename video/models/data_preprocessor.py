"""Batch assembly for video clips and frame-feature sequences, on the model's device.

Why here: the workers deliver uint8 clips (4x less shared memory than float); stacking, BGR->RGB and
normalisation run once per batch on the device. The normalisation is the image tasks' own
(:class:`oars.models.ImageDataPreprocessor`): clips are reshaped so that their channel axis is axis 1 and
handed to it, so every task normalises with the same code and the same argument checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from oars.models.data_preprocessor import ImageDataPreprocessor
from video.registry import MODELS

FORMATS = ("NCHW", "NCTHW")


@MODELS.register_module()
class ActionDataPreprocessor(ImageDataPreprocessor):
    """Clips (as ``PackActionInputs`` gives them) or feature sequences (``PackFeatureInputs``) -> one batch.

    Clips: ``inputs`` is a list of B uint8 tensors (or one stacked tensor) of
    * ``format_shape='NCHW'`` (2D recognizers): [V*T, 3, H, W] per sample (V views x T frames, views-major)
      -> float32 [B, V*T, 3, H, W];
    * ``format_shape='NCTHW'`` (3D recognizers): [V, 3, T, H, W] per sample -> float32 [B, V, 3, T, H, W].
    Channels are flipped BGR->RGB when ``bgr_to_rgb`` (the decoders give OpenCV order), then normalised with
    ``mean``/``std`` (0-255 scale, RGB order; None: no normalisation). Every clip of a batch must have the same
    shape (the test pipelines crop to a fixed size): clips are never padded.

    Features: ``inputs`` is a dict modality -> list of B float32 [T_i, D] tensors (or a stacked [B, T, D]) ->
    dict modality -> float32 [B, T_max, D] zero-padded at the end, plus ``inputs['mask']``: bool [B, T_max],
    True on the valid steps (``t < min(T_i, num_frames)``, ``num_frames`` read from each data sample's
    metainfo when present). ``mean``/``std``/``bgr_to_rgb`` do not apply to features.
    """

    def __init__(
        self,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        bgr_to_rgb: bool = False,
        format_shape: str = "NCHW",
        non_blocking: bool = False,
    ) -> None:
        super().__init__(mean=mean, std=std, bgr_to_rgb=bgr_to_rgb, non_blocking=non_blocking)
        if format_shape not in FORMATS:
            raise ValueError(f"ActionDataPreprocessor: format_shape={format_shape!r} is not supported; "
                             f"accepted: {list(FORMATS)}")
        self.format_shape = format_shape

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': clips or feature dict, 'data_samples': samples or None}`` -> same keys, batched."""
        if not isinstance(data, dict) or "inputs" not in data:
            raise TypeError(f"ActionDataPreprocessor expects a dict with an 'inputs' key, got {type(data).__name__}")
        data = self.cast_data(data)
        samples = data.get("data_samples")
        inputs = data["inputs"]
        if isinstance(inputs, Mapping):
            return dict(inputs=self.stack_features(inputs, samples), data_samples=samples)
        return dict(inputs=self.stack_clips(inputs, samples), data_samples=samples)

    def stack_clips(self, clips: Sequence[torch.Tensor] | torch.Tensor, samples: Sequence | None) -> torch.Tensor:
        """B clips (uint8 or float) -> float32 [B, V*T, 3, H, W] (NCHW) or [B, V, 3, T, H, W] (NCTHW), normalised."""
        rank = 4 if self.format_shape == "NCHW" else 5
        expected = "[V*T, 3, H, W]" if rank == 4 else "[V, 3, T, H, W]"
        if isinstance(clips, torch.Tensor):
            if clips.dim() != rank + 1 or clips.shape[2] != 3:
                raise ValueError(f"ActionDataPreprocessor: format_shape={self.format_shape} needs a stacked batch "
                                 f"[B, {expected[1:]}, got {tuple(clips.shape)}")
            batch = clips
        else:
            if not isinstance(clips, Sequence) or len(clips) == 0:
                raise ValueError("ActionDataPreprocessor: 'inputs' must be a non-empty list of clip tensors, got "
                                 f"{type(clips).__name__}")
            shapes = [tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__ for c in clips]
            for i, (clip, shape) in enumerate(zip(clips, shapes)):
                if not isinstance(clip, torch.Tensor) or clip.dim() != rank or clip.shape[1] != 3:
                    raise ValueError(f"ActionDataPreprocessor: clip {i} has shape {shape}; format_shape="
                                     f"{self.format_shape} expects {expected} (set FormatShape's input_format and "
                                     "the preprocessor's format_shape alike)")
            if len(set(shapes)) != 1:
                raise ValueError(f"ActionDataPreprocessor: clips of one batch differ in shape {sorted(set(shapes))}; "
                                 "crop or resize every clip to one size in the pipeline")
            batch = torch.stack(list(clips))
        if samples is not None and len(samples) != batch.shape[0]:
            raise ValueError(f"ActionDataPreprocessor: {batch.shape[0]} clips but {len(samples)} data samples")
        shape = batch.shape
        if rank == 4:  # [B, V*T, 3, H, W] -> [B*V*T, 3, H, W]
            flat = batch.reshape(-1, *shape[2:])
        else:  # [B, V, 3, T, H, W] -> [B*V, 3, T*H, W]: channels on axis 1, T and H merged (contiguous)
            flat = batch.reshape(shape[0] * shape[1], 3, shape[3] * shape[4], shape[5])
        return self._normalise(flat).reshape(shape)

    def stack_features(self, features: Mapping[str, Any], samples: Sequence | None) -> dict[str, torch.Tensor]:
        """dict modality -> B [T_i, D] tensors -> dict modality -> float32 [B, T_max, D], plus ``mask`` [B, T_max]."""
        if not features:
            raise ValueError("ActionDataPreprocessor: the feature dict in 'inputs' is empty")
        if "mask" in features:
            raise ValueError("ActionDataPreprocessor: 'mask' is reserved for the valid-step mask; rename that modality")
        out: dict[str, torch.Tensor] = {}
        lengths: torch.Tensor | None = None
        for name, value in features.items():
            seqs = list(value) if isinstance(value, (torch.Tensor, Sequence)) else None
            if not seqs or any(not isinstance(s, torch.Tensor) or s.dim() != 2 for s in seqs):
                raise ValueError(f"ActionDataPreprocessor: features[{name!r}] must be B tensors [T, D] (or [B, T, D])")
            dims = {int(s.shape[1]) for s in seqs}
            if len(dims) != 1:
                raise ValueError(f"ActionDataPreprocessor: features[{name!r}] have different widths {sorted(dims)}")
            lens = torch.tensor([s.shape[0] for s in seqs], device=seqs[0].device)
            if lengths is not None and lengths.numel() != lens.numel():
                raise ValueError(f"ActionDataPreprocessor: features[{name!r}] has {lens.numel()} samples, other "
                                 f"modalities {lengths.numel()}")
            lengths = lens if lengths is None else torch.minimum(lengths, lens)
            out[name] = torch.nn.utils.rnn.pad_sequence([s.float() for s in seqs], batch_first=True)
        assert lengths is not None
        if samples is not None:
            if len(samples) != lengths.numel():
                raise ValueError(f"ActionDataPreprocessor: {lengths.numel()} feature sequences but {len(samples)} "
                                 "data samples")
            given = [s.metainfo.get("num_frames") for s in samples]
            if all(g is not None for g in given):
                lengths = torch.minimum(lengths, torch.tensor(given, device=lengths.device))
        t_max = max(v.shape[1] for v in out.values())
        for name, value in out.items():  # modalities of unequal length: pad them all to the longest
            if value.shape[1] < t_max:
                out[name] = torch.nn.functional.pad(value, (0, 0, 0, t_max - value.shape[1]))
        out["mask"] = torch.arange(t_max, device=lengths.device)[None, :] < lengths[:, None]
        return out
