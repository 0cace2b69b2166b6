"""Multi-object tracking for detection streams (``oars-infer --track``): ByteTrack in numpy, torch-free.

:mod:`~oars_deploy.track.kalman` (constant-velocity Kalman filter in (cx, cy, a, h)),
:mod:`~oars_deploy.track.matching` (IoU and a minimum-cost assignment with a cost limit),
:mod:`~oars_deploy.track.byte_tracker` (the two-stage association), :mod:`~oars_deploy.track.options` (the
parameters and their flags), :mod:`~oars_deploy.track.draw` and :mod:`~oars_deploy.track.stream` (records and
pictures of a stream).
"""

from oars_deploy.track.byte_tracker import ByteTracker, Track
from oars_deploy.track.kalman import KalmanBoxFilter
from oars_deploy.track.matching import box_iou, linear_assignment, min_cost_assignment
from oars_deploy.track.options import TrackerConfig

__all__ = ["ByteTracker", "KalmanBoxFilter", "Track", "TrackerConfig", "box_iou", "linear_assignment",
           "min_cost_assignment"]
