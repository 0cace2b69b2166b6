"""CVAT for images 1.1 XML -> COCO instances dict (``tools/convert.py cvat2coco`` with an ``.xml`` input).

The format (CVAT's "CVAT for images 1.1" export, ``annotations.xml``)::

    <annotations><version>1.1</version>
      <meta><task>  (or <job>, <project>)  <labels><label><name>car</name>...</label></labels> ... </task></meta>
      <image id="0" name="a.jpg" width="640" height="480">
        <box label="car" occluded="0" xtl="1.5" ytl="2" xbr="30" ybr="40"><attribute name="a">v</attribute></box>
        <polygon label="car" occluded="1" points="1,2;30,2;30,40"/>
        <polyline .../> <points .../> <mask .../> <ellipse .../> <cuboid .../> <skeleton .../> <tag .../>
      </image>
    </annotations>

Boxes become a COCO bbox with an empty segmentation (as CVAT's own COCO export writes them); polygons keep their
points as the segmentation, with the bbox of their extent and the area by the shoelace formula; ``occluded`` and
the ``<attribute>`` children go to the annotation's ``attributes``. Shapes without an area or that COCO cannot hold
(polylines, points, masks, ellipses, cuboids, skeletons, rotated boxes, tags) are left out and counted.

Why a small expat reader instead of ``xml.etree``: every error names the file and the XML line of the element
(``parser.CurrentLineNumber`` at its start tag), which ElementTree's C parser does not keep, and lxml is not a
dependency.
"""

from __future__ import annotations

import math
import xml.parsers.expat
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from oars.data import storage
from oars.errors import DataError

AREA_SHAPES: tuple[str, ...] = ('box', 'polygon')
SKIPPED_SHAPES: tuple[str, ...] = ('polyline', 'points', 'mask', 'ellipse', 'cuboid', 'skeleton', 'tag')


@dataclass
class XmlElement:
    """One element of the parsed file: ``tag``, ``attrib``, ``line`` (1-based, of its start tag), ``children``
    and ``text`` (stripped)."""

    tag: str
    attrib: dict[str, str]
    line: int
    children: list[XmlElement] = field(default_factory=list)
    text: str = ''

    def find_all(self, tag: str) -> list[XmlElement]:
        """The direct children named ``tag``."""
        return [c for c in self.children if c.tag == tag]


def parse_xml(path: str) -> XmlElement:
    """The root element of ``path``, every element with its line number.

    Args:
        path: the XML file.

    Returns:
        The root :class:`XmlElement` (its ``children`` nested, each with the line of its start tag).

    Raises:
        DataError: the file cannot be read, or is not well-formed XML (the line and column of the problem).
    """
    parser = xml.parsers.expat.ParserCreate()
    parser.buffer_text = True
    stack: list[XmlElement] = []
    texts: list[list[str]] = []
    roots: list[XmlElement] = []

    def start(tag: str, attrib: dict[str, str]) -> None:
        element = XmlElement(tag, attrib, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)
        texts.append([])

    def end(tag: str) -> None:
        stack.pop().text = ''.join(texts.pop()).strip()

    def data(text: str) -> None:
        if texts:
            texts[-1].append(text)

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, data
    try:
        with storage.open_file(path, 'rb') as f:  # a local path or a URL
            parser.ParseFile(f)
    except OSError as err:
        raise DataError(f'cvat2coco: cannot read {path} ({type(err).__name__}: {err})') from None
    except xml.parsers.expat.ExpatError as err:
        raise DataError(f'cvat2coco: {path} line {err.lineno} column {err.offset + 1}: not well-formed XML '
                        f'({xml.parsers.expat.ErrorString(err.code)}); expected a CVAT for images 1.1 export '
                        '(annotations.xml)') from None
    return roots[0]


def meta_labels(root: XmlElement) -> list[str]:
    """The label names of ``<meta>`` (task, job or project; every ``<labels><label><name>``).

    Args:
        root: the ``<annotations>`` element.

    Returns:
        The names in file order, each once; sub-labels of skeletons (a non-empty ``<parent>``) are left out, so
        that they do not become categories of their own.
    """
    names: list[str] = []

    def walk(element: XmlElement) -> None:
        for child in element.children:
            if child.tag == 'labels':
                for label in child.find_all('label'):
                    name = next((c.text for c in label.find_all('name')), '')
                    parent = next((c.text for c in label.find_all('parent')), '')
                    if name and not parent and name not in names:
                        names.append(name)
            else:
                walk(child)

    for meta in root.find_all('meta'):
        walk(meta)
    return names


def _number(element: XmlElement, key: str, where: str) -> float:
    text = element.attrib.get(key)
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        shown = 'missing' if text is None else repr(text)
        raise DataError(f'{where}: attribute {key} is {shown}; expected a finite number')
    return value


def _size(element: XmlElement, key: str, where: str) -> int:
    value = _number(element, key, where)
    if value != int(value) or value <= 0:
        raise DataError(f'{where}: attribute {key} is {element.attrib[key]!r}; expected a positive whole number of '
                        'pixels')
    return int(value)


def parse_points(text: str | None, where: str) -> np.ndarray:
    """The ``points`` attribute of a CVAT polygon as numbers.

    Args:
        text: ``"x1,y1;x2,y2;..."`` (None when the attribute is missing).
        where: the start of an error message (file and line).

    Returns:
        [N, 2] float64 x, y (finite), N >= 3.

    Raises:
        DataError: malformed pairs, non-finite numbers, or fewer than 3 points.
    """
    try:
        points = np.array([[float(v) for v in pair.split(',')] for pair in (text or '').split(';') if pair.strip()],
                          dtype=np.float64)
    except ValueError:
        points = np.zeros((0, 3))
    if points.ndim != 2 or points.shape[1] != 2 or not np.isfinite(points).all():
        raise DataError(f'{where}: points {text!r:.80} are not "x1,y1;x2,y2;..." with finite numbers')
    if len(points) < 3:
        raise DataError(f'{where}: polygon has {len(points)} point(s) {text!r}; expected at least 3')
    return points


def _attributes(element: XmlElement) -> dict:
    """``occluded`` (bool) and the ``<attribute name="..">value</attribute>`` children (strings)."""
    attributes: dict = {'occluded': element.attrib.get('occluded', '0') == '1'}
    for child in element.find_all('attribute'):
        attributes[child.attrib.get('name', '')] = child.text
    return attributes


@dataclass
class CvatShape:
    """One box or polygon: its label, the XML line, the box corners (x1, y1, x2, y2) and the polygon (or None)."""

    label: str
    line: int
    box: tuple[float, float, float, float]
    polygon: np.ndarray | None
    attributes: dict


@dataclass
class CvatImage:
    """One ``<image>``: ``name``, ``width``, ``height``, its XML ``line`` and its ``shapes``."""

    name: str
    width: int
    height: int
    line: int
    shapes: list[CvatShape]


def _shape(element: XmlElement, where: str, skipped: Counter) -> CvatShape | None:
    label = element.attrib.get('label')
    if not label:
        raise DataError(f'{where}: <{element.tag}> has no label attribute')
    if element.tag == 'box':
        if 'rotation' in element.attrib and _number(element, 'rotation', where) % 360:
            skipped['rotated box'] += 1
            return None
        x1, y1, x2, y2 = (_number(element, k, where) for k in ('xtl', 'ytl', 'xbr', 'ybr'))
        if x2 <= x1 or y2 <= y1:
            raise DataError(f'{where}: box ({label}) xtl={x1:g} ytl={y1:g} xbr={x2:g} ybr={y2:g} has no area; '
                            'expected xbr > xtl and ybr > ytl')
        return CvatShape(label, element.line, (x1, y1, x2, y2), None, _attributes(element))
    points = parse_points(element.attrib.get('points'), f'{where}: <polygon> ({label})')
    (x1, y1), (x2, y2) = points.min(axis=0), points.max(axis=0)
    return CvatShape(label, element.line, (float(x1), float(y1), float(x2), float(y2)), points, _attributes(element))


def read_cvat_xml(path: str) -> tuple[list[str], list[CvatImage], Counter]:
    """Read a "CVAT for images 1.1" file.

    Args:
        path: the ``annotations.xml``.

    Returns:
        (the labels of ``<meta>``, the :class:`CvatImage` list in file order, the count of left-out shapes by
        kind: ``polyline``, ``points``, ``rotated box``, ...).

    Raises:
        DataError: naming ``path`` and the XML line: not well-formed, the root is not ``<annotations>``, a
            "CVAT for video" export (``<track>`` elements), an image without name or with a bad size, a repeated
            image name, a shape without label, a box with a non-numeric or empty extent, a polygon with fewer than
            3 points or malformed ``points``.
    """
    root = parse_xml(path)
    if root.tag != 'annotations':
        raise DataError(f'cvat2coco: {path} line {root.line}: root element <{root.tag}>; expected <annotations> '
                        '(a CVAT for images 1.1 export)')
    tracks = root.find_all('track')
    if tracks:
        raise DataError(f'cvat2coco: {path} line {tracks[0].line}: <track> elements: this is a "CVAT for video 1.1" '
                        'export; export the task as "CVAT for images 1.1" (or "COCO 1.0") instead')
    images, skipped, seen = [], Counter(), {}
    for element in root.find_all('image'):
        where = f'cvat2coco: {path} line {element.line}'
        name = element.attrib.get('name')
        if not name:
            raise DataError(f'{where}: <image> has no name attribute')
        if name in seen:
            raise DataError(f'{where}: image name {name!r} appears again (first at line {seen[name]}); expected '
                            'each image once')
        seen[name] = element.line
        width, height = _size(element, 'width', where), _size(element, 'height', where)
        shapes = []
        for child in element.children:
            at = f'cvat2coco: {path} line {child.line}'
            if child.tag in AREA_SHAPES:
                shape = _shape(child, at, skipped)
                if shape is not None:
                    shapes.append(shape)
            else:
                skipped[child.tag if child.tag in SKIPPED_SHAPES else f'<{child.tag}>'] += 1
        images.append(CvatImage(name, width, height, element.line, shapes))
    if not images:
        raise DataError(f'cvat2coco: {path}: no <image> elements; expected a CVAT for images 1.1 export with its '
                        'images (an empty task exports none)')
    return meta_labels(root), images, skipped


__all__ = ['AREA_SHAPES', 'SKIPPED_SHAPES', 'CvatImage', 'CvatShape', 'XmlElement', 'meta_labels',
           'parse_points', 'parse_xml', 'read_cvat_xml']
