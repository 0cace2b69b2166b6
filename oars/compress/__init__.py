"""Model compression: structured pruning (``prune``), the variant table (``table``) and the ``PrunedModel`` config
type that lets any tool rebuild a pruned network from an ordinary config (``pruned_model``).

``tools/compress.py --method prune|qat|distill`` is the one entry point. Import the submodules directly; this
package imports nothing heavy (torch-pruning is loaded only when pruning runs).
"""
