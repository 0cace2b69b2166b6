"""``labels_out_of_range``: the eager answer, and the in-graph refusal under torch.compile (no graph break)."""

from __future__ import annotations

import pytest
import torch

from oars.models.utils import labels_out_of_range


def test_eager_answers_for_the_caller_to_raise():
    assert not labels_out_of_range(torch.tensor([0, 2]), 3, "unused")
    assert labels_out_of_range(torch.tensor([0, 3]), 3, "unused")
    assert labels_out_of_range(torch.tensor([-1]), 3, "unused")
    assert not labels_out_of_range(torch.zeros(0, dtype=torch.long), 3, "unused")  # an image without boxes


def test_compiled_check_raises_inside_one_graph():
    torch._dynamo.reset()
    check = torch.compile(lambda labels: labels_out_of_range(labels, 3, "head: label out of range"),
                          backend="eager", fullgraph=True)  # fullgraph: a graph break would raise
    assert check(torch.tensor([0, 2])) is False
    with pytest.raises(RuntimeError, match="head: label out of range"):
        check(torch.tensor([1, 5]))
    torch._dynamo.reset()
