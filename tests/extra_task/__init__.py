"""A small extra task defined inside the test suite (DESIGN.md §9): it proves that a task plugs into the core, the
tools and the runtime through the contract alone (:class:`oars.tasks.Task`, the ``oars.tasks`` entry point group,
a predictor plug-in named by deploy.yaml's ``predictor`` key), with no file outside ``tests/`` edited.

The task (scope ``oddtask``; the package is deliberately *not* named after its scope, so nothing may find it by
module name) classifies the demo shapes images (``oars.data.demo_shapes``) by their dominant shape: the class
(circle, square, triangle) that covers the most pixels of the image's label map.

Modules: ``registry`` (the scope's child registries), ``datasets`` (dataset + pack step), ``models`` (a tiny CNN
and the export module), ``evaluation`` (accuracy), ``inference`` (what ``tools/infer.py`` runs), ``predictor``
(the torch-free runtime plug-in ``oddtask_classes`` and its result record), ``task`` (the contract object
``TASK``). ``tests/test_extra_task.py`` registers it as a real entry point (a ``*.dist-info`` folder on the
subprocesses' ``PYTHONPATH``) and runs it through ``tools/*.py``.
"""
