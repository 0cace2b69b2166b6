"""``oars-infer`` for GAN generators (``cli.run`` hands a model folder whose deploy.yaml has a ``gan`` section here).

- noise models: ``--seed S --num N [--label K]`` (no ``-i``): ``sample_000.png`` ... and ``grid.png``;
- image models: ``-i IMAGE_OR_DIR``: ``<stem>.png`` (the output) and ``<stem>_pair.png`` (input | output);
- attribute models: also ``--attrs Black_Hair=1,Male=0`` (names from deploy.yaml's ``gan.attr_names``; unnamed
  attributes are 0) and, for STGAN, ``--src-attrs`` (the source image's attributes, default all 0).

tools/infer.py writes the same files with the same helpers (gan.apis), and the same results.jsonl records
(:func:`noise_records`, :func:`translation_record`: one :class:`~.records.GANImagesRecord` per sample or
image).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import cv2
import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.output_paths import output_stems
from oars_deploy.outputs import read_image
from oars_deploy.predictors.gan_images.config import image_grid, make_labels, make_noise, parse_attrs, side_by_side
from oars_deploy.predictors.gan_images.predictor import GANPredictor
from oars_deploy.predictors.gan_images.records import GANImagesRecord, named_values
from oars_deploy.words import plural

DEFAULT_NUM = 16


def sample_name(index: int) -> str:
    """The file name of sample ``index`` (``sample_007.png``)."""
    return f"sample_{index:03d}.png"


TRANSLATION_NAMES = ("{stem}.png", "{stem}_pair.png")


def translation_names(path: str, stem: str | None = None) -> list[str]:
    """The names of one translated image's pictures: ``<stem>.png`` (the output), ``<stem>_pair.png``; ``stem``:
    the output name :func:`oars_deploy.output_paths.output_stems` gave ``path`` (None: the file's own stem)."""
    stem = osp.splitext(osp.basename(path))[0] if stem is None else stem
    return [t.format(stem=stem) for t in TRANSLATION_NAMES]


def write_samples(images: list[np.ndarray], out_dir: str) -> list[str]:
    """``sample_{i:03d}.png`` per image and ``grid.png`` of all; returns the paths (grid last)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for i, img in enumerate(images):
        paths.append(osp.join(out_dir, sample_name(i)))
        cv2.imwrite(paths[-1], img)
    paths.append(osp.join(out_dir, "grid.png"))
    cv2.imwrite(paths[-1], image_grid(images))
    return paths


def write_translation(path: str, shown: np.ndarray, output: np.ndarray, out_dir: str,
                      stem: str | None = None) -> list[str]:
    """``<stem>.png`` (output) and ``<stem>_pair.png`` (input as the model saw it | output); ``stem`` as in
    :func:`translation_names`."""
    os.makedirs(out_dir, exist_ok=True)
    out, pair = (osp.join(out_dir, name) for name in translation_names(path, stem))
    cv2.imwrite(out, output)
    cv2.imwrite(pair, side_by_side(shown, output))
    return [out, pair]


def attribute_vectors(gan: dict, attrs: str | None, src_attrs: str | None) -> tuple[np.ndarray | None,
                                                                                  np.ndarray | None]:
    """The ``attrs`` / ``src_attrs`` vectors the generator is fed (float32 [K], attr_names order; None for a graph
    without that input). ``src_attrs`` not given is all 0, as the predictor feeds it; tools/infer.py and
    oars-infer call this, so both feed and record the same numbers."""
    names = gan.get("attr_names") or []
    inputs = [spec["name"] for spec in gan["inputs"]]
    vec = parse_attrs(attrs, names) if "attrs" in inputs else None
    src = parse_attrs(src_attrs, names, flag="--src-attrs") if "src_attrs" in inputs else None
    return vec, src


def noise_record(image: str, seed: int, index: int, label: int | None, gan: dict) -> GANImagesRecord:
    """The record of sample ``index`` (row ``index`` of :func:`make_noise`'s noise for ``seed``), written as
    ``image``; ``label`` its class id for a class-conditional model, else None. ``oars-infer`` and ``oars-serve``
    both make their noise records here."""
    names = list(gan.get("class_names") or [])
    return GANImagesRecord(input=None, images=[image], seed=int(seed), index=int(index), label=label,
                           class_name=names[label] if label is not None and label < len(names) else None)


def noise_records(written: list[str], seed: int, labels: np.ndarray | None, gan: dict) -> list[GANImagesRecord]:
    """One record per sample of :func:`write_samples` (``written``: its paths, grid.png last, not a record).

    Args:
        written: the paths :func:`write_samples` returned. seed: the noise seed (row i of its noise is sample i).
        labels: int [N] class ids of a class-conditional model, else None. gan: deploy.yaml's ``gan`` section.
    """
    return [noise_record(osp.basename(path), seed, i, None if labels is None else int(labels[i]), gan)
            for i, path in enumerate(written[:-1])]


def translation_record(path: str, written: list[str], attrs: np.ndarray | None, src_attrs: np.ndarray | None,
                       gan: dict) -> GANImagesRecord:
    """The record of one translated image (``written``: :func:`write_translation`'s two paths; ``attrs`` /
    ``src_attrs``: the vectors fed, :func:`attribute_vectors`)."""
    names = gan.get("attr_names") or []
    return GANImagesRecord(input=path, images=[osp.basename(p) for p in written], attrs=named_values(attrs, names),
                           src_attrs=named_values(src_attrs, names))


def check_gan_args(args: argparse.Namespace, gan: dict) -> None:
    """The flags that fit ``gan.kind``; a :class:`DeployError` naming the misplaced one."""
    kind = gan["kind"]
    if getattr(args, "draw_threshold", None) is not None:
        raise DeployError("--draw-threshold applies to detection models, not to GAN generators")
    if kind == "noise":
        if args.input is not None:
            raise DeployError("this model generates from noise (gan.kind noise): it takes no -i; use --seed S "
                              "--num N" + (" --label K" if gan.get("num_classes") else ""))
        if args.attrs is not None or args.src_attrs is not None:
            raise DeployError("--attrs / --src-attrs apply to attribute models (StarGAN/AttGAN/STGAN)")
        if args.label is not None and not gan.get("num_classes"):
            raise DeployError("--label applies to class-conditional generators (CGAN); this one has no classes")
        return
    if args.input is None:
        raise DeployError(f"this model translates images (gan.kind {kind}): give -i IMAGE_OR_DIR")
    if args.num is not None or args.label is not None:
        raise DeployError("--num / --label apply to noise generators (DCGAN/CGAN), not to image models")
    if kind == "image" and (args.attrs is not None or args.src_attrs is not None):
        raise DeployError("--attrs / --src-attrs apply to attribute models (StarGAN/AttGAN/STGAN), not to this one")
    if kind == "image_attrs" and args.attrs is None:
        raise DeployError(f"this model edits attributes: give --attrs NAME=0|1,... (valid names: "
                          f"{', '.join(gan['attr_names'])})")
    if args.src_attrs is not None and not any(s["name"] == "src_attrs" for s in gan["inputs"]):
        raise DeployError("--src-attrs applies to STGAN (a model fed the source attributes), not to this one")


def run_gan(args: argparse.Namespace, failures: Failures | None = None,
            results: list[GANImagesRecord] | None = None, predictor: GANPredictor | None = None) -> list[str]:
    """Generate or translate with the model of ``args.model_dir``; returns the written paths.

    Args:
        args: the ``oars-infer`` arguments.
        failures: where unreadable images go; None raises their summary at the end (after writing the others).
        results: when given, one :class:`~.records.GANImagesRecord` per sample / image is appended.
        predictor: what runs the generator: a :class:`GANPredictor` or an object in its role (``tools/infer.py``
            passes the checkpoint's, so a checkpoint and its export write the same files by this same loop); None:
            the export of ``args.model_dir``.
    """
    if predictor is None:
        predictor = GANPredictor(args.model_dir, device=args.device, backend=args.backend)
    gan = predictor.gan
    check_gan_args(args, gan)
    results = [] if results is None else results
    if gan["kind"] == "noise":
        num = DEFAULT_NUM if args.num is None else args.num
        noise = make_noise(args.seed, num, gan["z_dim"])
        labels = make_labels(args.label, num, gan["num_classes"], gan.get("class_names", ())) \
            if gan.get("num_classes") else None
        written = write_samples(predictor.generate(noise, labels), args.output_dir)
        results += noise_records(written, args.seed, labels, gan)
        print(f"wrote {num} samples and grid.png to {args.output_dir}")
        return written
    attrs, src = attribute_vectors(gan, args.attrs, args.src_attrs)
    paths = list_images(args.input)
    stems = output_stems(paths, TRANSLATION_NAMES)  # x.png beside x.jpg: x_png.png and x_jpg.png, not one x.png
    step = args.batch_size or predictor.batch_size or 8
    own = failures is None
    failures = Failures() if own else failures
    written = []
    for start in range(0, len(paths), step):
        kept, images = [], []
        for path in paths[start:start + step]:
            try:
                images.append(read_image(path))
                kept.append(path)
            except DeployError as err:
                failures.add(path, str(err))
        if not images:
            continue
        shown, outputs = predictor.translate(images, attrs, src)
        for path, a, b in zip(kept, shown, outputs):
            pair = write_translation(path, a, b, args.output_dir, stems[path])
            results.append(translation_record(path, pair, attrs, src, gan))
            written += pair
    print(f"wrote {plural(len(written), 'picture')} to {args.output_dir}")
    if own:
        failures.raise_if_any(total=len(paths))
    return written
