"""Every video test runs with ``video`` as mmengine's default scope.

mmengine's ``Registry.build`` switches to the registry of the current default scope when one is set, and an earlier
test's Runner (detection, segmentation) leaves its scope as the current ``DefaultScope`` instance: without this,
``video.registry.MODELS.build({'type': 'Recognizer2D'})`` would look in the detection registry when the whole suite
runs, and pass when the video tests run alone.
"""

from __future__ import annotations

import pytest
from mmengine.registry import DefaultScope


@pytest.fixture(autouse=True)
def video_default_scope():
    with DefaultScope.overwrite_default_scope("video"):
        yield
