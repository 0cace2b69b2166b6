"""Predict images with a trained model: tools/infer.py -c CONFIG -w CKPT -i IMAGE_OR_DIR -o OUT_DIR.

GANs: image models take -i (attribute editors also --attrs Black_Hair=1,Male=0 [--src-attrs ...]); noise models
(DCGAN/CGAN) take no -i but --seed S --num N [--label K].

``-o`` takes both the output folder and ``key=value`` config overrides, as on every tool:
``-o out/ test_dataloader.dataset.pipeline.1.scale=[256,256]``.

An image of a folder that cannot be read does not stop the others: they are written, and the tool ends with
one list of the files it could not read (exit status 2).
"""

import argparse
import importlib
import importlib.util
import inspect

from oars.cli import run_cli, split_output_and_overrides
from oars.engine.entry import load
from oars.errors import OarsError
from oars_deploy.failures import Failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("-w", "--weights", required=True, help="checkpoint")
    parser.add_argument("-i", "--input", default=None, help="an image or a folder of images (not for noise GANs)")
    parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[],
                        metavar="OUT_DIR|KEY=VALUE", help="output folder and/or config overrides")
    parser.add_argument("--output-dir", default=None, help="output folder (alternative to -o OUT_DIR)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--draw-threshold", type=float, default=None,
                        help="detection: draw boxes with a score at or above this (default 0.3)")
    parser.add_argument("--attrs", default=None, help="GAN attribute editors: target attributes, e.g. Male=1,Young=0")
    parser.add_argument("--src-attrs", default=None, help="STGAN: the source image's attributes (same form)")
    parser.add_argument("--seed", type=int, default=None, help="noise GANs: seed of the first sample (default 0)")
    parser.add_argument("--num", type=int, default=None, help="noise GANs: number of samples")
    parser.add_argument("--label", type=int, default=None, help="CGAN: class of every sample (default: cycle)")
    args = parser.parse_args()
    output, overrides = split_output_and_overrides(args.values, args.output_dir)
    cfg = load(args.config, overrides)
    scope = cfg.get("default_scope")
    if not scope or importlib.util.find_spec(scope) is None or importlib.util.find_spec(f"{scope}.apis") is None:
        raise OarsError(f"{args.config}: default_scope {scope!r} has no inference entry point ({scope}.apis)")
    apis = importlib.import_module(f"{scope}.apis")
    accepted = inspect.signature(apis.run_inference).parameters
    extra = {}
    for name in ("draw_threshold", "attrs", "src_attrs", "seed", "num", "label"):
        value = getattr(args, name)
        if value is None:
            continue
        if name not in accepted:
            flag = "--" + name.replace("_", "-")
            raise OarsError(f"{flag} does not apply to default_scope {scope!r} (see tools/infer.py --help)")
        extra[name] = value
    if args.input is None and "seed" not in accepted:  # only generative tasks make pictures from nothing
        raise OarsError("-i/--input is required: an image or a folder of images")
    failures = Failures()  # images that cannot be read: the others are written, then one summary, exit 2
    written = apis.run_inference(cfg, args.weights, args.input, output, device=args.device, failures=failures,
                                 **extra)
    print(f"wrote {len(written)} pictures to {output}")
    failures.raise_if_any(total=len(written) + len(failures))


if __name__ == "__main__":
    run_cli(main)
