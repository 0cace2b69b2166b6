"""Every detection test runs with ``detection`` as mmengine's default scope (see tests/task_scope.py for why)."""

from task_scope import task_scope_fixture

detection_module_scope = task_scope_fixture("detection", "module")  # module-scoped fixtures build models too
detection_default_scope = task_scope_fixture("detection")
