"""Scope layers that must keep their output width although the dependency graph would let them be pruned: those
whose outputs reach RoI pooling (an R-CNN's FPN output convs, read by the RPN and the RoI heads).

Why these are kept rather than pruned through: torch-pruning has no rule for torchvision's ``roi_align`` /
``roi_pool`` operators (custom ops). Found out on the R-CNNs: its tracer records such an operator as a generic
element-wise node (its ``grad_fn`` is ``GeneratedBackwardFor_torchvision_roi_align_defaultBackward``), which passes
channel indices through unchanged -- right for RoI pooling, which keeps channels -- so the coupling does reach the
RoI heads' first layers through the scatter into RoI order and the flatten. But that path exists only for the
pyramid levels that received RoIs in the traced batch, and the RoI heads take their input width as a constructor
argument (``SingleRoIExtractor.out_channels``, ``Shared2FCBBoxHead.in_channels``, both checked at run time, neither
a tensor a generated config records): pruned through, the network fails. So the layers that feed RoI pooling keep
their outputs, and everything before them (for an FPN: the lateral convs, coupled across levels by the top-down
additions, and the output convs' inputs) is still pruned.

The RoI pooling nodes are found in the traced graph, so the traced batch must give at least one RoI: an RPN always
does (it keeps its top proposals whatever their scores). Levels that received none share the verdict of those that
did when one layer reads them all (an R-CNN's shared RPN conv couples every FPN level).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .prune_base import in_scope, torch_pruning

# torchvision's RoI pooling operators, as their names appear in the grad_fn of their outputs
ROI_OPS = ("roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool")


def _is_roi_op(node: Any) -> bool:
    """Whether a graph node is one of torchvision's RoI pooling operators (by its grad_fn's class name)."""
    name = type(node.grad_fn).__name__.lower() if node.grad_fn is not None else ""
    return any(f"torchvision_{op}_" in name for op in ROI_OPS)


def roi_pooled_layers(model: nn.Module, graph: Any, prefixes: list[str]) -> dict[str, str]:
    """In-scope layers whose output channels reach a RoI pooling operator in the traced graph, with the reason.

    Args:
        model: the network the graph was traced on.
        graph: its ``torch_pruning.DependencyGraph`` (built on a batch in ``mode='tensor'``).
        prefixes: the pruning scope's module prefixes (``['backbone', 'neck']``).

    Returns:
        ``{module_path: reason}`` for every in-scope convolution / linear layer whose output-channel pruning group
        contains a RoI pooling node (for an R-CNN with FPN: the neck's output convs, coupled across levels through
        the RPN's shared conv, and any extra level read from them). Empty when the model pools no RoIs.
    """
    tp = torch_pruning()

    roi_nodes = {node for node in graph.module2node.values() if _is_roi_op(node)}
    if not roi_nodes:
        return {}
    names = {m: n for n, m in model.named_modules()}
    roots = (tp.ops.TORCH_CONV, tp.ops.TORCH_LINEAR)
    kept: dict[str, str] = {}
    decided: set[nn.Module] = set()
    for path, module in model.named_modules():
        if module in decided or module not in graph.module2node:
            continue
        if not (in_scope(path, prefixes) and isinstance(module, roots)):
            continue
        pruner = graph.get_pruner_of_module(module)
        group = graph.get_pruning_group(module, pruner.prune_out_channels, [0])
        # every layer whose outputs are pruned in this group shares the verdict: one group query per coupled set
        outs = [dep.target.module for dep, _ in group if graph.is_out_channel_pruning_fn(dep.handler)]
        decided.update(outs)
        if not any(dep.target in roi_nodes for dep, _ in group):
            continue
        for out in outs:
            name = names.get(out)
            if name is not None and isinstance(out, roots) and in_scope(name, prefixes):
                kept[name] = ("its output channels reach RoI pooling (torchvision roi_align/roi_pool), whose readers "
                              "(the RoI heads) keep their input width")
    return kept
