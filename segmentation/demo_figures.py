"""Generated human-parsing demo set: stick figures whose left and right limbs can be told apart only by their pose.

Why: the ACE2P demo (``make demo-parsing``) must show what the flip test-time augmentation does to left/right
classes, offline and in minutes. Each image holds one figure - head, torso, two arms, two legs, drawn by rule with
random proportions, limb angles, clothing colours, position and scale on a textured background. The figure is
seen from the front or from the back:

* front: a face (two eyes, a mouth) and a row of buttons down the torso; the figure's *left* limbs are on the
  image's right, as in a photo of a person facing the camera;
* back: hair over the whole head, a plain torso; its left limbs are on the image's left.

Left and right limbs share one colour, and their angles are drawn independently, so nothing but the facing
cue says which arm is the left one. The odd-numbered images are mirror copies of the even ones with the left and
right labels exchanged (a mirrored front view is still a front view): the set is closed under the flip that
``RandomFlipParsing`` and flip TTA use, and a model that ignores the swap is wrong on one of each pair.

Classes: 0 background, 1 head, 2 torso, 3 left-arm, 4 right-arm, 5 left-leg, 6 right-leg (pairs 3/4, 5/6).

Layout written under ``out_dir`` (LIP's layout, read by ``HumanParsingDataset``)::

    train_images/NNNN.png  train_segmentations/NNNN.png  train_id.txt     (BGR images; palette-PNG labels)
    val_images/NNNN.png    val_segmentations/NNNN.png    val_id.txt
    meta.json              generation parameters; a matching complete set skips regeneration

Every pair of images comes from its own generator seeded with ``(seed, split, pair index)``. Run
``python -m segmentation.demo_figures --out data/demo_figures`` (or ``tools/demo_data.py figures``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from oars.data.generated_set import GeneratedSet, check_int_arg, count_files, generator_main, run_generator
from oars_deploy.draw import save_label_png
from segmentation.datasets.lip import parsing_palette
from segmentation.flip_pairs import swap_label_pairs

CLASSES: tuple[str, ...] = ("background", "head", "torso", "left-arm", "right-arm", "left-leg", "right-leg")
FLIP_PAIRS: tuple[tuple[int, int], ...] = ((3, 4), (5, 6))
PALETTE: list[list[int]] = parsing_palette(len(CLASSES))
SPLITS: tuple[str, ...] = ("train", "val")
FORMAT_VERSION = 1
_GENERATOR_NAME = "segmentation.demo_figures"
HEAD, TORSO, L_ARM, R_ARM, L_LEG, R_LEG = 1, 2, 3, 4, 5, 6


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Float32 [size, size, 3] texture: base colour, a linear gradient, optional stripes, smooth noise."""
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5
    xx, yy = np.meshgrid(coords, coords)
    img = np.empty((size, size, 3), np.float32)
    img[:] = rng.uniform(40.0, 215.0, 3)
    theta = rng.uniform(0.0, 2.0 * np.pi)
    img += (xx * np.cos(theta) + yy * np.sin(theta))[..., None] * rng.uniform(-80.0, 80.0, 3).astype(np.float32)
    if rng.random() < 0.5:
        phi, cycles = rng.uniform(0.0, np.pi), rng.uniform(2.0, 10.0)
        wave = np.sin(2 * np.pi * cycles * (xx * np.cos(phi) + yy * np.sin(phi)))
        img += wave[..., None] * rng.uniform(-25.0, 25.0, 3).astype(np.float32)
    coarse = rng.normal(0.0, 1.0, (5, 5, 3)).astype(np.float32)
    img += cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC) * np.float32(rng.uniform(5.0, 20.0))
    return img


def _colour(rng: np.random.Generator, away_from: np.ndarray, min_dist: float = 90.0) -> np.ndarray:
    """A random colour at least ``min_dist`` from ``away_from`` (the farthest of 8 candidates otherwise)."""
    cands = rng.uniform(0.0, 255.0, (8, 3)).astype(np.float32)
    dist = np.linalg.norm(cands - away_from, axis=1)
    good = np.flatnonzero(dist >= min_dist)
    return cands[good[0] if good.size else int(np.argmax(dist))]


def _limb(canvas: np.ndarray, start: tuple[float, float], angle: float, length: float, width: int,
          value: int | tuple) -> tuple[int, int]:
    """Draw a thick line from ``start`` at ``angle`` (radians, 0 = down, positive towards image right); returns
    its end point."""
    end = (start[0] + length * np.sin(angle), start[1] + length * np.cos(angle))
    p0 = (int(round(start[0])), int(round(start[1])))
    p1 = (int(round(end[0])), int(round(end[1])))
    cv2.line(canvas, p0, p1, value, width, cv2.LINE_8)
    return p1


def render_figure(rng: np.random.Generator, size: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """One figure: (BGR uint8 [size, size, 3], class ids uint8 [size, size]); see the module docstring."""
    img = _background(rng, size)
    label = np.zeros((size, size), np.uint8)
    bg = img.mean(axis=(0, 1))
    s = size * rng.uniform(0.75, 1.0) / 96.0  # figure scale: about 80 px tall at size 96, s = 1
    cx = size / 2 + rng.uniform(-0.12, 0.12) * size
    top = size * 0.08 + rng.uniform(0.0, 0.06) * size
    head_r = 8.0 * s * rng.uniform(0.9, 1.15)
    torso_w, torso_h = 20.0 * s * rng.uniform(0.85, 1.15), 28.0 * s * rng.uniform(0.9, 1.1)
    arm_len, leg_len = 22.0 * s * rng.uniform(0.85, 1.1), 30.0 * s * rng.uniform(0.85, 1.05)
    limb_w = max(3, int(round(6.0 * s * rng.uniform(0.85, 1.15))))
    front = bool(rng.random() < 0.5)
    head_c = (cx, top + head_r)
    t_top = head_c[1] + head_r + 1.0
    x0, x1 = cx - torso_w / 2, cx + torso_w / 2
    hips_y = t_top + torso_h
    # the figure's left is the image's right when it faces the camera
    left_side = 1.0 if front else -1.0
    skin, shirt, trousers, hair = (_colour(rng, bg) for _ in range(4))
    sleeves = _colour(rng, bg)

    def draw(part: int, colour: np.ndarray, fn) -> None:
        mask = np.zeros((size, size), np.uint8)
        fn(mask, 1)
        label[mask > 0] = part
        img[mask > 0] = colour

    # legs, then torso, arms, head (later parts occlude earlier ones); angles drawn independently per limb
    for part, side in ((L_LEG, left_side), (R_LEG, -left_side)):
        hip = (cx + side * torso_w * 0.28, hips_y - 2.0)
        angle = side * rng.uniform(0.0, 0.6)
        draw(part, trousers, lambda m, v, hip=hip, angle=angle: _limb(m, hip, angle, leg_len, limb_w + 1, v))
    draw(TORSO, shirt, lambda m, v: cv2.rectangle(m, (int(x0), int(t_top)), (int(x1), int(hips_y)), v, -1))
    if front:  # buttons down the shirt's front
        for k in range(3):
            y = int(t_top + (k + 1) * torso_h / 4)
            cv2.circle(img, (int(cx), y), max(1, int(s * 1.5)), (0.3 * shirt).tolist(), -1)
    for part, side in ((L_ARM, left_side), (R_ARM, -left_side)):
        shoulder = (cx + side * (torso_w / 2 + limb_w / 2), t_top + limb_w / 2)
        angle = side * rng.uniform(0.2, 2.4)  # from hanging down to raised above the shoulder
        draw(part, sleeves, lambda m, v, sh=shoulder, angle=angle: _limb(m, sh, angle, arm_len, limb_w, v))
    centre = (int(round(head_c[0])), int(round(head_c[1])))
    radius = int(round(head_r))
    draw(HEAD, hair if not front else skin, lambda m, v: cv2.circle(m, centre, radius, v, -1))
    if front:  # hair on top, two eyes and a mouth
        cv2.ellipse(img, centre, (radius, radius), 0, 180, 360, hair.tolist(), -1)
        eye_dy, eye_dx = int(round(head_r * 0.1)), int(round(head_r * 0.4))
        dark = (0.25 * skin).tolist()
        for dx in (-eye_dx, eye_dx):
            cv2.circle(img, (centre[0] + dx, centre[1] + eye_dy), max(1, int(round(head_r * 0.15))), dark, -1)
        cv2.line(img, (centre[0] - eye_dx // 2, centre[1] + int(head_r * 0.55)),
                 (centre[0] + eye_dx // 2, centre[1] + int(head_r * 0.55)), dark, 1)
    img += rng.normal(0.0, 3.0, img.shape).astype(np.float32)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8), label


def mirror(img: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The figure mirrored left-right, its left/right labels exchanged (:data:`FLIP_PAIRS`)."""
    return np.ascontiguousarray(img[:, ::-1]), swap_label_pairs(np.ascontiguousarray(label[:, ::-1]), FLIP_PAIRS)


def _owned_paths(root: Path) -> list[Path]:
    """Everything generate() writes besides meta.json; the only paths it ever deletes."""
    return [p for s in SPLITS for p in (root / f"{s}_images", root / f"{s}_segmentations", root / f"{s}_id.txt")]


def _is_complete(root: Path, params: dict) -> bool:
    return all(count_files(root / f"{s}_{kind}", "*.png") == params[f"num_{s}"] and (root / f"{s}_id.txt").is_file()
               for s in SPLITS for kind in ("images", "segmentations"))


def _result(root: Path, params: dict, skipped: bool) -> dict:
    return {"out_dir": str(root), "skipped": skipped, "classes": list(CLASSES),
            "num_images": {s: params[f"num_{s}"] for s in SPLITS}, "meta": str(root / "meta.json")}


def generate(out_dir: str | Path, num_train: int = 400, num_val: int = 80, size: int = 96, seed: int = 0,
             overwrite: bool = False) -> dict:
    """Write the set under ``out_dir`` unless a complete one with the same parameters is there.

    ``num_train`` / ``num_val`` must be even (figures come in mirrored pairs). Returns ``out_dir``, ``skipped``
    (True when an identical set was reused), ``classes``, ``num_images`` per split and ``meta``. A non-empty
    ``out_dir`` this generator did not write is refused (``FileExistsError``) unless ``overwrite``.
    """
    owner = "demo_figures.generate"
    params = {"num_train": check_int_arg(owner, "num_train", num_train, 0),
              "num_val": check_int_arg(owner, "num_val", num_val, 0),
              "size": check_int_arg(owner, "size", size, 48), "seed": check_int_arg(owner, "seed", seed, 0)}
    for split in SPLITS:
        if params[f"num_{split}"] % 2:
            raise ValueError(f"{owner}: num_{split} must be even (each figure comes with its mirror copy), got "
                             f"{params[f'num_{split}']}")
    if params["num_train"] + params["num_val"] == 0:
        raise ValueError(f"{owner}: num_train and num_val are both 0; nothing to generate")
    root = Path(out_dir)
    gset = GeneratedSet(root, _GENERATOR_NAME, FORMAT_VERSION, params, _owned_paths(root),
                        "*_images/, *_segmentations/, *_id.txt and meta.json")
    if not overwrite and gset.reusable_meta() is not None and _is_complete(root, params):
        return _result(root, params, skipped=True)
    gset.begin(overwrite, classes=list(CLASSES), palette=PALETTE, flip_pairs=[list(p) for p in FLIP_PAIRS])
    for s_idx, split in enumerate(SPLITS):
        img_dir, seg_dir = root / f"{split}_images", root / f"{split}_segmentations"
        img_dir.mkdir(parents=True, exist_ok=True)
        seg_dir.mkdir(parents=True, exist_ok=True)
        names = []
        for pair in range(params[f"num_{split}"] // 2):
            img, label = render_figure(np.random.default_rng([params["seed"], s_idx, pair]), params["size"])
            for k, (im, lab) in enumerate(((img, label), mirror(img, label))):
                name = f"{2 * pair + k:04d}"
                if not cv2.imwrite(str(img_dir / f"{name}.png"), im):
                    raise OSError(f"cv2.imwrite failed for {img_dir / name}.png")
                save_label_png(lab, PALETTE, seg_dir / f"{name}.png")
                names.append(name)
        (root / f"{split}_id.txt").write_text("".join(f"{n}\n" for n in names))
    gset.finish()
    return _result(root, params, skipped=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generator's flags (``python -m segmentation.demo_figures`` and ``tools/demo_data.py figures``)."""
    parser.add_argument("--out", default="data/demo_figures", help="output root (default: data/demo_figures)")
    parser.add_argument("--num-train", type=int, default=400, help="training images, even (default 400)")
    parser.add_argument("--num-val", type=int, default=80, help="validation images, even (default 80)")
    parser.add_argument("--size", type=int, default=96, help="image side in pixels (default 96)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="regenerate even if an identical set exists")


def run(args: argparse.Namespace) -> int:
    """Generate the set of ``args`` and print what was written (or that an identical set was reused).

    Raises:
        OarsError: bad sizes or counts, or ``--out`` holding other files (naming the folder).
    """
    res = run_generator("demo_figures", generate, args.out, args.num_train, args.num_val, args.size, args.seed,
                        args.overwrite)
    for split in SPLITS:
        print(f"  {split}: {res['num_images'][split]} figures (half of them mirror copies) -> "
              f"{res['out_dir']}/{split}_images, {split}_segmentations, {split}_id.txt")
    print(f"  classes: {', '.join(CLASSES)}; left/right pairs {[list(p) for p in FLIP_PAIRS]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: generate the set and print what was written (or that an identical set was reused)."""
    return generator_main("python -m segmentation.demo_figures", __doc__.split("\n")[0], add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
