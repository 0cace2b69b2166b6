"""The deploy.yaml of an exported GAN generator (its ``gan`` section) and the numbers a GAN predictor feeds it.

A deploy.yaml with a ``gan`` section describes a generator graph (tools/export.py on a ``default_scope: gan``
config; see gan.export):

- ``gan.kind``: ``noise`` (DCGAN/CGAN: ``noise`` float32 [N, z_dim] (+ ``label`` int64 [N]) -> image),
  ``image`` (Pix2Pix/CycleGAN: ``image`` float32 [N, 3, H, W] RGB 0..255 -> image) or ``image_attrs``
  (StarGAN/AttGAN: ``image`` + ``attrs`` float32 [N, K]; STGAN also ``src_attrs`` [N, K]);
- ``gan.inputs``: every graph input ``{name, shape, dtype}`` (batch -1 when dynamic);
- ``gan.z_dim``, ``gan.num_classes`` / ``gan.class_names`` (noise kinds), ``gan.attr_names`` and
  ``gan.attr_encoding`` (attribute kinds), ``gan.input_size`` / ``gan.output_size`` ([H, W]).

The output ``image`` is float32 [N, 3, H, W] RGB in 0..255 (normalisation and denormalisation are in the graph).
This module also holds what the predictor and tools/infer.py share, so both feed the generator the same numbers:
:func:`make_noise`, :func:`parse_attrs`, :func:`to_bgr_images`, :func:`side_by_side`, :func:`image_grid`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from oars_deploy.draw.layout import enlarge, enlarge_factor
from oars_deploy.errors import DeployError

GAN_KEY = "gan"
KINDS = ("noise", "image", "image_attrs")
INPUT_NAMES = ("noise", "label", "image", "attrs", "src_attrs")
ATTR_ENCODING = ("0/1 per attribute in attr_names order (1 = the output has it); unnamed attributes are 0")
STGAN_RULE = ("STGAN: the graph is fed the target (attrs) and source (src_attrs) vectors and forms the scaled "
              "difference (attrs - src_attrs) * 2 * thres_int itself: an attribute equal in both stays")


def validate_gan(data: dict, path: str) -> None:
    """Check the ``gan`` section of a deploy.yaml (kind, inputs, sizes, names); :class:`DeployError` naming ``path``
    and the key."""
    if GAN_KEY not in data:
        raise DeployError(f"{path}: not a GAN generator (no `gan` section, which predictor gan_images needs: its "
                          "graph inputs, sizes and names); export the generator again with tools/export.py")
    gan = data[GAN_KEY]
    if not isinstance(gan, dict):
        raise DeployError(f"{path}: gan must be a mapping, got {gan!r}")
    kind = gan.get("kind")
    if kind not in KINDS:
        raise DeployError(f"{path}: gan.kind must be one of {list(KINDS)}, got {kind!r}")
    inputs = gan.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise DeployError(f"{path}: gan.inputs must be a non-empty list of {{name, shape, dtype}}, got {inputs!r}")
    names = []
    for i, spec in enumerate(inputs):
        if not isinstance(spec, dict) or spec.get("name") not in INPUT_NAMES:
            raise DeployError(f"{path}: gan.inputs[{i}].name must be one of {list(INPUT_NAMES)}, got {spec!r}")
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape):
            raise DeployError(f"{path}: gan.inputs[{i}].shape must be a list of ints, got {shape!r}")
        names.append(spec["name"])
    needed = {"noise": ["noise"], "image": ["image"], "image_attrs": ["image", "attrs"]}[kind]
    missing = [n for n in needed if n not in names]
    if missing:
        raise DeployError(f"{path}: gan.kind {kind} needs inputs {needed}; gan.inputs lacks {missing}")
    if kind == "noise":
        _positive(gan, "z_dim", path)
        if "label" in names:
            _positive(gan, "num_classes", path)
            classes = gan.get("class_names")
            if not isinstance(classes, list) or len(classes) != gan["num_classes"]:
                raise DeployError(f"{path}: gan.class_names must list num_classes={gan['num_classes']} names, got "
                                  f"{classes!r}")
    else:
        size = gan.get("input_size")
        if not isinstance(size, list) or len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
            raise DeployError(f"{path}: gan.input_size must be [H, W], got {size!r}")
    if kind == "image_attrs":
        attrs = gan.get("attr_names")
        if not isinstance(attrs, list) or not attrs or not all(isinstance(a, str) for a in attrs):
            raise DeployError(f"{path}: gan.attr_names must be a non-empty list of attribute names, got {attrs!r}")


def _positive(section: dict, key: str, path: str) -> None:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DeployError(f"{path}: gan.{key} must be a positive int, got {value!r}")


def make_noise(seed: int, num: int, z_dim: int) -> np.ndarray:
    """float32 [num, z_dim] N(0, 1) noise from ``numpy.random.default_rng(seed)``: the deployed predictor and
    tools/infer.py draw the same rows for the same seed (so their images can be compared)."""
    if num < 1:
        raise DeployError(f"--num must be >= 1, got {num}")
    return np.random.default_rng(int(seed)).standard_normal((int(num), int(z_dim))).astype(np.float32)


def make_labels(label: int | None, num: int, num_classes: int, class_names: Sequence[str] = ()) -> np.ndarray:
    """int64 [num]: ``label`` for every row, or a class sweep ``i % num_classes`` when None; a label outside
    [0, num_classes) is a :class:`DeployError` listing the classes."""
    if label is None:
        return (np.arange(num) % num_classes).astype(np.int64)
    if not 0 <= int(label) < num_classes:
        names = f" ({', '.join(f'{i}={n}' for i, n in enumerate(class_names))})" if class_names else ""
        raise DeployError(f"--label {label}: expected a class id in [0, {num_classes}){names}")
    return np.full(num, int(label), dtype=np.int64)


def parse_attrs(text: str | None, names: Sequence[str], flag: str = "--attrs") -> np.ndarray:
    """``"Black_Hair=1,Male=0"`` -> float32 [K] 0/1 vector in ``names`` order (unnamed attributes 0).

    An unknown name, a value other than 0/1 or a malformed pair is a :class:`DeployError` listing the valid names.
    """
    vec = np.zeros(len(names), dtype=np.float32)
    if text is None or not str(text).strip():
        return vec
    index = {n: i for i, n in enumerate(names)}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise DeployError(f"{flag} {text!r}: expected NAME=0|1 pairs separated by commas (e.g. "
                              f"{names[0]}=1); valid names: {', '.join(names)}")
        if key not in index:
            raise DeployError(f"{flag}: unknown attribute {key!r}; valid names: {', '.join(names)}")
        if value not in ("0", "1"):
            raise DeployError(f"{flag}: {key}={value!r}: the value must be 0 or 1")
        vec[index[key]] = float(value)
    return vec


def to_bgr_images(batch: Any) -> list[np.ndarray]:
    """The graph's float [N, 3, H, W] RGB 0..255 -> N uint8 HxWx3 BGR images (rounded, clipped) for cv2.imwrite."""
    arr = np.asarray(batch, dtype=np.float32)
    if arr.ndim != 4 or arr.shape[1] != 3:
        raise DeployError(f"the generator output must be [N, 3, H, W], got {list(arr.shape)}")
    arr = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return [np.ascontiguousarray(x.transpose(1, 2, 0)[..., ::-1]) for x in arr]


PAIR_MIN_SIDE = 128  # pair pictures of small images (the 64-px pix2pix demo) are enlarged to this
GRID_MIN_SIDE = 64  # grid cells of small samples (the 32-px CGAN digits) are enlarged to this


def side_by_side(left: np.ndarray, right: np.ndarray, gap: int = 4, min_side: int = PAIR_MIN_SIDE) -> np.ndarray:
    """``left | right`` on one white-separated canvas (both HxWx3 uint8; the shorter one is padded at the bottom).

    Both are enlarged by the same whole factor (nearest neighbour) until the smaller one's short side reaches
    ``min_side`` (0: as they are), so a 64-px translation is large enough to compare with its input."""
    factor = enlarge_factor(min(left.shape[0], right.shape[0]), min(left.shape[1], right.shape[1]), min_side)
    left, right = enlarge(left, factor), enlarge(right, factor)
    h = max(left.shape[0], right.shape[0])
    canvas = np.full((h, left.shape[1] + gap + right.shape[1], 3), 255, dtype=np.uint8)
    canvas[:left.shape[0], :left.shape[1]] = left
    canvas[:right.shape[0], left.shape[1] + gap:] = right
    return canvas


def image_grid(images: Sequence[np.ndarray], ncol: int | None = None, gap: int = 2,
               min_side: int = GRID_MIN_SIDE) -> np.ndarray:
    """The images (same size HxWx3 uint8) in rows of ``ncol`` (default ceil(sqrt(N))), ``gap`` white pixels apart;
    each enlarged by a whole factor (nearest neighbour) to a short side of at least ``min_side`` (0: as they are)."""
    if not images:
        raise DeployError("no images to put in a grid")
    factor = enlarge_factor(images[0].shape[0], images[0].shape[1], min_side)
    images = [enlarge(img, factor) for img in images]
    n = len(images)
    ncol = ncol or int(np.ceil(np.sqrt(n)))
    nrow = int(np.ceil(n / ncol))
    h, w = images[0].shape[:2]
    canvas = np.full((nrow * h + (nrow - 1) * gap, ncol * w + (ncol - 1) * gap, 3), 255, dtype=np.uint8)
    for i, img in enumerate(images):
        r, c = divmod(i, ncol)
        canvas[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = img
    return canvas
