"""Deprecated name of :mod:`oars_deploy.clips.decode` (video reading, task-neutral).

Old code keeps importing: this name stands for the moved module itself (the same module object, so monkeypatching
either name patches both), with a DeprecationWarning.
"""

import sys
import warnings

import oars_deploy.clips.decode as _moved

warnings.warn("oars_deploy.video_decode moved to oars_deploy.clips.decode",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
