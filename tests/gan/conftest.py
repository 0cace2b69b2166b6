"""Every gan test runs with ``gan`` as mmengine's default scope (as tests/video/conftest.py explains: an earlier
test's Runner leaves its own scope current, and ``Registry.build`` would then look in that task's registry)."""

from __future__ import annotations

import pytest
from mmengine.registry import DefaultScope


@pytest.fixture(autouse=True)
def gan_default_scope():
    with DefaultScope.overwrite_default_scope("gan"):
        yield
