"""Training engine: Runner assembly, hooks, optimizer wrappers and checkpoints.

Importing this package registers the engine's hooks and optimizer wrapper (it is the
``oars.engine`` location of the HOOKS and OPTIM_WRAPPERS registries) and installs the safe
checkpoint loader and the atomic checkpoint writer.
"""

from . import checkpoint, hooks, optim_wrapper  # noqa: F401  (registration on import)
