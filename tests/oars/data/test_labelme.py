"""oars.data.labelme: the shared reader of labelme files (top-level checks, shape parsing, errors naming the json)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from oars.data.labelme import list_labelme_files, parse_shape, read_labelme, shape_type
from oars.errors import DataError, DataFileNotFoundError


def _write(path, doc) -> None:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def test_read_and_parse_shapes(tmp_path):
    patch = np.zeros((2, 3), np.uint8)
    patch[1, 2] = 255
    buf = io.BytesIO()
    Image.fromarray(patch).save(buf, format='PNG')
    shapes = [{'label': 'cat', 'points': [[1, 2], [5, 2], [1, 6]]},  # no shape_type: a polygon (old files)
              {'label': 'dog', 'points': [[0, 0], [3.5, 4]], 'shape_type': 'rectangle'},
              {'label': 'x', 'points': [[1, 1]], 'shape_type': 'point'},
              {'label': 'm', 'points': [[4, 4], [6, 5]], 'shape_type': 'mask', 'mask': base64.b64encode(
                  buf.getvalue()).decode()}]
    _write(tmp_path / 'b.json', {'imagePath': 'b.png', 'imageHeight': 12.0, 'imageWidth': 16, 'shapes': shapes})
    _write(tmp_path / 'a.json', {'imageHeight': 4, 'imageWidth': 4, 'shapes': []})
    (tmp_path / 'notes.txt').write_text('not a labelme file')
    files = list_labelme_files(str(tmp_path))
    assert [p.name for p in files] == ['a.json', 'b.json']
    assert read_labelme(files[0]).image_path == ''
    doc = read_labelme(files[1], require_image_path=True)
    assert (doc.height, doc.width, doc.image_path) == (12, 16, 'b.png') and isinstance(doc.height, int)
    assert [shape_type(s) for s in doc.shapes] == ['polygon', 'rectangle', 'point', 'mask']
    parsed = [parse_shape(s, doc.shape_at(i)) for i, s in enumerate(doc.shapes)]
    assert parsed[2] is None  # no area
    assert [(p.kind, p.label) for p in parsed if p] == [('polygon', 'cat'), ('rectangle', 'dog'), ('mask', 'm')]
    assert parsed[1].points.dtype == np.float64 and parsed[1].points.tolist() == [[0, 0], [3.5, 4]]
    assert np.array_equal(parsed[3].mask, patch > 0) and parsed[0].mask is None
    assert shape_type('oops') is None


@pytest.mark.parametrize('doc,pattern', [
    ('{not json', r'cannot read labelme file .*x\.json'),
    ([1, 2], r'x\.json: expected a json object, got list'),
    ({'imageWidth': 8, 'shapes': []}, r"x\.json: no 'imageHeight'; expected imageHeight, imageWidth, shapes"),
    ({'imageHeight': 8, 'imageWidth': 2.5, 'shapes': []}, r"x\.json: 'imageWidth' is 2\.5; expected a positive whole"),
    ({'imageHeight': True, 'imageWidth': 8, 'shapes': []}, r"'imageHeight' is True"),
    ({'imageHeight': 8, 'imageWidth': 8, 'shapes': {}}, r"x\.json: 'shapes' must be a list, got dict"),
])
def test_bad_files_name_the_json(tmp_path, doc, pattern):
    _write(tmp_path / 'x.json', doc)
    with pytest.raises(DataError, match=pattern):
        read_labelme(tmp_path / 'x.json')


def test_bad_shapes_and_folders_are_named(tmp_path):
    _write(tmp_path / 'x.json', {'imageHeight': 8, 'imageWidth': 8, 'shapes': []})
    with pytest.raises(DataError, match=r"x\.json: no 'imagePath'"):
        read_labelme(tmp_path / 'x.json', require_image_path=True)
    at = 'labelme file x.json: shape 3'
    for shape, pattern in [
        (7, r'shape 3 is 7; expected an object'),
        ({'label': 'a', 'points': [[0, 0]] * 3, 'shape_type': 'cuboid'}, r"shape 3: shape_type 'cuboid' is not one"),
        ({'label': '', 'points': [[0, 0]] * 3}, r"shape 3 \(polygon\): label is ''; expected a class name"),
        ({'label': 'a', 'points': [[0, 0], [1, 1]]}, r"shape 3 \('a', polygon\): points .*at least 3 \[x, y\] pairs"),
        ({'label': 'a', 'points': [[0, 0], [1, float('nan')]], 'shape_type': 'rectangle'}, r'at least 2 \[x, y\]'),
        ({'label': 'a', 'points': 'abc', 'shape_type': 'circle'}, r"points 'abc'"),
        ({'label': 'a', 'points': [[0, 0], [1, 1]], 'shape_type': 'mask', 'mask': '@@'}, r"'mask' is not a base64"),
    ]:
        with pytest.raises(DataError, match=pattern):
            parse_shape(shape, at)
    with pytest.raises(DataFileNotFoundError, match='labelme folder .*nowhere not found'):
        list_labelme_files(str(tmp_path / 'nowhere'))
    (tmp_path / 'empty').mkdir()
    with pytest.raises(DataFileNotFoundError, match=r'no labelme \*\.json files in .*empty'):
        list_labelme_files(str(tmp_path / 'empty'))
