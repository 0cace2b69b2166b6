"""Every video test runs with ``video`` as mmengine's default scope (see tests/task_scope.py for why)."""

from task_scope import task_scope_fixture

video_module_scope = task_scope_fixture("video", "module")  # module-scoped fixtures build models too
video_default_scope = task_scope_fixture("video")
