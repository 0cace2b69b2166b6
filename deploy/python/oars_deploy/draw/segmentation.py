"""Deprecated name of :mod:`oars_deploy.predictors.semantic_labels.draw` (the kind's plug-in package).

Old code keeps importing: this name stands for the moved module itself (the same module object, so monkeypatching
either name patches both), with a DeprecationWarning.
"""

import sys
import warnings

import oars_deploy.predictors.semantic_labels.draw as _moved

warnings.warn("oars_deploy.draw.segmentation moved to oars_deploy.predictors.semantic_labels.draw",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
