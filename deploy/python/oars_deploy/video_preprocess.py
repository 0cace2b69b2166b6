"""Deprecated name of :mod:`oars_deploy.clips.preprocess` (video reading, task-neutral).

Old code keeps importing: this name stands for the moved module itself (the same module object, so monkeypatching
either name patches both), with a DeprecationWarning.
"""

import sys
import warnings

import oars_deploy.clips.preprocess as _moved

warnings.warn("oars_deploy.video_preprocess moved to oars_deploy.clips.preprocess",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
