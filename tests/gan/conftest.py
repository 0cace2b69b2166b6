"""Every gan test runs with ``gan`` as mmengine's default scope (see tests/task_scope.py for why)."""

from task_scope import task_scope_fixture

gan_module_scope = task_scope_fixture("gan", "module")  # module-scoped fixtures build models too
gan_default_scope = task_scope_fixture("gan")
