"""The Inception-v3 pool features of FID and KID, from a torchvision ``inception_v3`` state dict the user gives.

Why torchvision's network: it is already a dependency and users can save its ImageNet weights
(``torchvision.models.inception_v3(weights='IMAGENET1K_V1').state_dict()``) on a machine with internet; nothing
is ever downloaded here. Its numbers are comparable between oars runs but not with papers that use the
TF-ported "pt_inception-2015-12-05" network (that network's file is a different architecture).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import inception_v3

from oars.errors import DataError, DataFileNotFoundError

NUM_FEATURES = 2048
# Keys of a full torchvision state dict that the feature network does not have (classifier, auxiliary head).
_DROPPED_PREFIXES = ('fc.', 'AuxLogits.')


def pick_device(device: str | None) -> torch.device:
    """``device``, or CUDA when available else the CPU for None/'auto'."""
    if device in (None, 'auto'):
        return torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    return torch.device(device)


class InceptionFeatures(nn.Module):
    """float or uint8 [B, 3, H, W] RGB in 0..255 -> float32 [B, 2048] average-pool features of Inception-v3.

    Images are resized (bilinear) to ``input_size`` (299, the size the network was trained at; at least 75) and
    mapped to [-1, 1], what the network's ImageNet weights expect once torchvision's ``transform_input`` is
    folded in. Built without weights; ``load(path)`` loads them (``init_weights``-style, never in ``__init__``).
    """

    num_features = NUM_FEATURES

    def __init__(self, input_size: int = 299) -> None:
        super().__init__()
        if isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 75:
            raise DataError(f'InceptionFeatures: input_size must be an integer >= 75, got {input_size!r}')
        self.input_size = input_size
        self.net = inception_v3(weights=None, aux_logits=False, init_weights=False, transform_input=False)
        self.net.fc = nn.Identity()
        self.eval()

    def load(self, path: str) -> InceptionFeatures:
        """Load a torchvision ``inception_v3`` state dict (or a checkpoint with ``state_dict``) from ``path``;
        ``fc.*`` and ``AuxLogits.*`` are ignored. Raises ``DataFileNotFoundError`` / ``DataError`` naming the
        file and the first missing or unexpected keys. ``path`` may be a hub name (``torchvision://inception_v3``):
        its file is fetched into the hub cache (or the one offline message raised) first."""
        from oars.hub import is_hub_name

        if is_hub_name(path):
            from oars.hub.loading import hub_file

            path = hub_file(path)[1]
        if not os.path.isfile(path):
            raise DataFileNotFoundError(f'inception_weights file not found: {path}')
        try:
            state = torch.load(path, map_location='cpu', weights_only=True)
        except Exception as err:  # noqa: BLE001 (pickle, zip and torch errors alike mean "not a state dict")
            raise DataError(f'inception_weights {path}: not a readable torch state dict ({err})') from None
        if isinstance(state, dict) and isinstance(state.get('state_dict'), dict):
            state = state['state_dict']
        if not isinstance(state, dict):
            raise DataError(f'inception_weights {path}: expected a state dict, got {type(state).__name__}')
        state = {k.removeprefix('module.'): v for k, v in state.items() if not k.startswith(_DROPPED_PREFIXES)}
        missing, unexpected = self.net.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise DataError(f'inception_weights {path} is not a torchvision inception_v3 state dict: '
                            f'{len(missing)} missing keys (e.g. {missing[:3]}), {len(unexpected)} unexpected '
                            f'(e.g. {unexpected[:3]})')
        return self

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dim() != 4 or images.shape[1] != 3:
            raise DataError(f'InceptionFeatures: expected RGB images [B, 3, H, W], got {tuple(images.shape)}')
        x = images.float()
        if tuple(x.shape[-2:]) != (self.input_size, self.input_size):
            x = F.interpolate(x, size=(self.input_size, self.input_size), mode='bilinear', align_corners=False)
        return self.net(x / 127.5 - 1.0).float()
