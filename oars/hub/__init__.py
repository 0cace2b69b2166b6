"""Named pretrained weights: torchvision's published checkpoints (``torchvision://<builder>[.<member>]``) and the
user's registered ones (``oars://<name>``), usable wherever a config takes a checkpoint path (``init.checkpoint``,
``load_from``, ``tools/eval.py -w``) and from ``tools/hub.py``.

- :mod:`oars.hub.entries`: names -> entries (URL, sha256 prefix, converter, parameter count) from torchvision's
  weight enums and ``torchvision.yaml``;
- :mod:`oars.hub.download`: the hub cache (``torch.hub.get_dir()/checkpoints``), checked atomic downloads,
  ``OARS_HUB_URL`` / ``OARS_HUB_OFFLINE``;
- :mod:`oars.hub.local`: the local registry (``$OARS_HOME/hub.json``);
- :mod:`oars.hub.converters`: converter names the task packages register;
- :mod:`oars.hub.loading`: fetch + convert, and ``load_from`` with mis-shaped parameters skipped and listed;
- :mod:`oars.hub.verify`: the one sha256 check every load of a name goes through (:func:`check_hash`).
"""

from .converters import ConverterError, get_converter, register_converter, registered_converters
from .download import HubError, HubUnavailableError, cache_dir, fetch
from .entries import SCHEMES, HubEntry, entry_task, is_hub_name, list_entries, resolve
from .local import read_registry, register
from .verify import WeightsHashError, check_hash

__all__ = ["SCHEMES", "ConverterError", "HubEntry", "HubError", "HubUnavailableError", "WeightsHashError",
           "cache_dir", "check_hash", "entry_task", "fetch", "get_converter", "is_hub_name", "list_entries",
           "read_registry", "register", "register_converter", "registered_converters", "resolve"]
