"""Every segmentation test runs with ``segmentation`` as mmengine's default scope.

mmengine's ``Registry.build`` switches to the registry of the current default scope when one is set, and another
task's test (a Runner, or a conftest like tests/video's) leaves its scope as the current ``DefaultScope`` instance:
under ``make test``'s xdist workers any file may run after any other, so a segmentation test must not rely on the order.
"""

from __future__ import annotations

import pytest
from mmengine.registry import DefaultScope


@pytest.fixture(autouse=True)
def segmentation_default_scope():
    with DefaultScope.overwrite_default_scope("segmentation"):
        yield
