"""Every detection test runs with ``detection`` as mmengine's default scope (see tests/task_scope.py for why)."""

from task_scope import task_scope_fixture

detection_default_scope = task_scope_fixture("detection")
