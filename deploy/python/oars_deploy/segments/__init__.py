"""Deprecated name of :mod:`oars_deploy.predictors.video_segments.segments` (the kind's plug-in package).

Old code keeps importing: this name stands for the moved module itself (the same module object, so monkeypatching
either name patches both); its submodules load from the new package, with a DeprecationWarning.
"""

import sys
import warnings

import oars_deploy.predictors.video_segments.segments as _moved

warnings.warn("oars_deploy.segments moved to oars_deploy.predictors.video_segments.segments",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
