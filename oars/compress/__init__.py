"""Model compression's primitives: structured pruning of a module (``prune``, ``prune_kept``, ``prune_layers``) and
the ``PrunedModel`` config type that lets any tool rebuild a pruned network from an ordinary config
(``pruned_model``); QAT model surgery (``qat_model``, ``type: QATModel``); the distillation losses and model
(``distill_losses``, ``distill_model``, ``distill_classes``); each method's settings and training config
(``options``, ``ptq``, ``qat``, ``distill``); automatic pruning's layer groups, search and controller
(``auto_prune``, ``auto_prune_search``, ``auto_prune_options``, ``sa_controller``) and sensitivity curves
(``sensitivity``); measurement (``measure``) and the variant table (``table``).

These import only downward (never ``oars.pipelines``). The runs that load configs and checkpoints, train, export
and evaluate are :mod:`oars.pipelines.compress`, which ``tools/compress.py --method prune|ptq|qat|distill`` calls.
Import the submodules directly; this package imports nothing (torch-pruning is loaded only when pruning runs).
"""
