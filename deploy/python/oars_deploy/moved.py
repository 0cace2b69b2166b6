"""Old import names of modules that moved into a predictor plug-in's package or into ``clips``.

Why: code written against an earlier oars_deploy (``from oars_deploy.video_predictor import VideoPredictor``) keeps
working. An old name imports the module under its new name and stands for it (the same module object, so
monkeypatching either name patches both); no file is kept at the old place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

PACKAGE = __name__.rpartition(".")[0]  # oars_deploy

# old module (under oars_deploy) -> its module now
MOVED = {
    "video_decode": "clips.decode",
    "video_inputs": "clips.inputs",
    "video_preprocess": "clips.preprocess",
    "video_sampling": "clips.sampling",
    "video_config": "predictors.clip_classes.config",
    "video_predictor": "predictors.clip_classes.predictor",
    "video_cli": "predictors.clip_classes.cli",
    "video_features_config": "predictors.feature_classes.config",
    "video_features_io": "predictors.feature_classes.files",
    "video_features_predictor": "predictors.feature_classes.predictor",
    "gan_config": "predictors.gan_images.config",
    "gan_predictor": "predictors.gan_images.predictor",
    "gan_cli": "predictors.gan_images.cli",
}


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``oars_deploy.<old>`` and loads it as the module it moved to."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        # importlib returns what sys.modules holds under the name after exec_module: the moved module itself
        sys.modules[module.__name__] = importlib.import_module(f"{PACKAGE}.{MOVED[module.__name__.rpartition('.')[2]]}")


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        sys.meta_path.append(_OldNames())
