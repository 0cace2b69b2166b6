"""Every segmentation test runs with ``segmentation`` as mmengine's default scope (see tests/task_scope.py for why)."""

from task_scope import task_scope_fixture

segmentation_module_scope = task_scope_fixture("segmentation", "module")  # module-scoped fixtures build models too
segmentation_default_scope = task_scope_fixture("segmentation")
