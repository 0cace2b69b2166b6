"""``oars-infer`` for GAN generators (``cli.run`` hands a model folder whose deploy.yaml has a ``gan`` section here).

- noise models: ``--seed S --num N [--label K]`` (no ``-i``): ``sample_000.png`` ... and ``grid.png``;
- image models: ``-i IMAGE_OR_DIR``: ``<stem>.png`` (the output) and ``<stem>_pair.png`` (input | output);
- attribute models: also ``--attrs Black_Hair=1,Male=0`` (names from deploy.yaml's ``gan.attr_names``; unnamed
  attributes are 0) and, for STGAN, ``--src-attrs`` (the source image's attributes, default all 0).

tools/infer.py writes the same files with the same helpers (gan.apis).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import cv2
import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.gan_config import image_grid, make_labels, make_noise, parse_attrs, side_by_side
from oars_deploy.gan_predictor import GANPredictor
from oars_deploy.image_files import list_images
from oars_deploy.outputs import read_image

DEFAULT_NUM = 16


def write_samples(images: list[np.ndarray], out_dir: str) -> list[str]:
    """``sample_{i:03d}.png`` per image and ``grid.png`` of all; returns the paths (grid last)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for i, img in enumerate(images):
        paths.append(osp.join(out_dir, f"sample_{i:03d}.png"))
        cv2.imwrite(paths[-1], img)
    paths.append(osp.join(out_dir, "grid.png"))
    cv2.imwrite(paths[-1], image_grid(images))
    return paths


def write_translation(path: str, shown: np.ndarray, output: np.ndarray, out_dir: str) -> list[str]:
    """``<stem>.png`` (output) and ``<stem>_pair.png`` (input as the model saw it | output)."""
    os.makedirs(out_dir, exist_ok=True)
    stem = osp.splitext(osp.basename(path))[0]
    out, pair = osp.join(out_dir, f"{stem}.png"), osp.join(out_dir, f"{stem}_pair.png")
    cv2.imwrite(out, output)
    cv2.imwrite(pair, side_by_side(shown, output))
    return [out, pair]


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


def run_gan(args: argparse.Namespace) -> list[str]:
    """Generate or translate with the model of ``args.model_dir``; returns the written paths."""
    predictor = GANPredictor(args.model_dir, device=args.device, backend=args.backend)
    gan = predictor.gan
    check_gan_args(args, gan)
    if gan["kind"] == "noise":
        num = DEFAULT_NUM if args.num is None else args.num
        noise = make_noise(args.seed, num, gan["z_dim"])
        labels = make_labels(args.label, num, gan["num_classes"], gan.get("class_names", ())) \
            if gan.get("num_classes") else None
        written = write_samples(predictor.generate(noise, labels), args.output_dir)
        print(f"wrote {num} samples and grid.png to {args.output_dir}")
        return written
    names = gan.get("attr_names") or []
    attrs = parse_attrs(args.attrs, names) if gan["kind"] == "image_attrs" else None
    src = parse_attrs(args.src_attrs, names, flag="--src-attrs") if args.src_attrs is not None else None
    paths = list_images(args.input)
    step = args.batch_size or predictor.batch_size or 8
    failures, written = Failures(), []
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
            written += write_translation(path, a, b, args.output_dir)
    print(f"wrote {len(written)} pictures to {args.output_dir}")
    failures.raise_if_any(total=len(paths))
    return written
