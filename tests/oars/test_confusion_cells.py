"""confusion_cells.json: the writer keeps, per cell of a confusion matrix, the images with the largest counts (capped),
the totals over every image; the reader gives them back and names the file and the fault when it is not that format.
Hand-computed: 3 images, 3 classes, planted confusions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from oars.evaluation.confusion_cells import (
    AXIS,
    CELLS_FILE,
    CellsFileError,
    cells_path,
    read_cells,
    sparse_counts,
    write_cells,
)

CLASSES = ["road", "car", "tree"]


def _planted() -> list[tuple[str, object]]:
    a = np.array([[10, 2, 0], [0, 5, 0], [0, 0, 0]])  # 2 road pixels called car
    b = torch.tensor([[4, 7, 0], [0, 0, 3], [0, 0, 9]])  # 7 road called car, 3 car called tree
    c = [(0, 1, 2), (2, 0, 1), (1, 1, 0)]  # triples: 2 road called car (a tie with a), 1 tree called road
    return [("a.png", a), ("b.png", b), ("c.png", c)]


def test_write_then_read_the_planted_cells(tmp_path):
    path = tmp_path / "eval" / CELLS_FILE
    assert write_cells(path, CLASSES, "pixels", _planted()) == str(path)
    body = json.loads(path.read_text())
    assert body["axis"] == AXIS == "rows ground truth, columns prediction" and body["limit"] == 50
    assert body["cells"]["0,1"] == [["b.png", 7], ["a.png", 2], ["c.png", 2]]  # count desc, ties in input order
    assert body["cells"]["0,0"] == [["a.png", 10], ["b.png", 4]]
    assert body["cells"]["1,2"] == [["b.png", 3]] and body["cells"]["2,0"] == [["c.png", 1]]
    assert "2,1" not in body["cells"] and "1,1" in body["cells"]  # zero cells are left out, c's (1, 1, 0) too
    assert body["cells"]["1,1"] == [["a.png", 5]]
    assert body["totals"]["0,1"] == [11, 3]

    cells = read_cells(path)
    assert cells.classes == CLASSES and cells.unit == "pixels" and cells.axis == AXIS
    assert cells.images(0, 1) == [("b.png", 7), ("a.png", 2), ("c.png", 2)]
    assert cells.images(2, 1) == [] and cells.total(2, 1) == (0, 0) and cells.total(0, 0) == (14, 2)
    assert cells.matrix().tolist() == [[14, 11, 0], [0, 5, 3], [1, 0, 9]]  # the sum of the three images


def test_cap_keeps_the_largest_and_the_totals_keep_all(tmp_path):
    per_image = [(f"im{k}.png", [(0, 1, k + 1)]) for k in range(7)] + [("im2.png", [(0, 1, 10)])]  # im2 twice: 13
    cells = read_cells(write_cells(tmp_path / CELLS_FILE, CLASSES, "boxes", per_image, limit=3))
    assert cells.images(0, 1) == [("im2.png", 13), ("im6.png", 7), ("im5.png", 6)]
    assert cells.total(0, 1) == (1 + 2 + 3 + 4 + 5 + 6 + 7 + 10, 7) and cells.limit == 3


def test_writer_refuses_what_is_not_a_matrix(tmp_path):
    with pytest.raises(ValueError, match="unit must be one of"):
        write_cells(tmp_path / "x.json", CLASSES, "metres", [])
    with pytest.raises(ValueError, match=r"image 'a.png' has count 2 at \(0, 3\); the matrix is 3x3"):
        write_cells(tmp_path / "x.json", CLASSES, "pixels", [("a.png", [(0, 3, 2)])])
    with pytest.raises(ValueError, match=r"square \[C, C\] matrix, got shape \(2, 3\)"):
        sparse_counts(np.zeros((2, 3)))
    assert not (tmp_path / "x.json").exists()
    assert cells_path(tmp_path / "run" / "report.html") == str(tmp_path / "run" / CELLS_FILE)


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("{not json", "not JSON"),
    (json.dumps({"classes": ["a"], "unit": "pixels"}), "expected an object with 'classes'"),
    (json.dumps({"classes": ["a"], "unit": "px", "cells": {}}), "expected an object with 'classes'"),
    (json.dumps({"classes": ["a"], "unit": "pixels", "cells": {"0;0": []}}), "cell key '0;0' is not 'row,column'"),
    (json.dumps({"classes": ["a"], "unit": "pixels", "cells": {"0,1": []}}), "cell '0,1' is outside the 1x1 matrix"),
    (json.dumps({"classes": ["a"], "unit": "pixels", "cells": {"0,0": [3]}}), "not a list of \\[image, count\\]"),
])
def test_reader_names_the_file_and_the_fault(tmp_path, content, message):
    path = tmp_path / CELLS_FILE
    if content is not None:
        path.write_text(content)
    with pytest.raises(CellsFileError, match=message) as err:
        read_cells(path)
    assert str(path) in str(err.value)
