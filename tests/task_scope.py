"""The autouse fixture each task's tests/<task>/conftest.py installs: every test of that task runs with the task as
mmengine's default scope.

mmengine's ``Registry.build`` switches to the registry of the current default scope when one is set, and another
task's test (a Runner, or another task's fixture) leaves its scope as the current ``DefaultScope`` instance: without
this, ``video.registry.MODELS.build({'type': 'Recognizer2D'})`` would look in the detection registry when the whole
suite runs and pass when the video tests run alone. Under ``make test``'s xdist workers any file may run after any
other, so no test may rely on the order.
"""

from __future__ import annotations

import pytest
from mmengine.registry import DefaultScope


def task_scope_fixture(scope: str, fixture_scope: str = "function"):
    """An autouse fixture that runs each test (``fixture_scope='function'``) or each module, its module-scoped
    fixtures included (``'module'``: set up before them, since pytest sets up autouse fixtures of a scope first),
    inside ``overwrite_default_scope(scope)``."""

    @pytest.fixture(autouse=True, scope=fixture_scope)
    def default_scope():
        with DefaultScope.overwrite_default_scope(scope):
            yield

    return default_scope
