"""Parameters, FLOPs and MACs of a config's model: tools/get_flops.py -c CONFIG [--shape H [W]] [--depth N]
[-o key=value ...] [--device cpu|cuda].

Counts one forward of the model as it is exported (the task's export graph on the task's sample input: an image
[B, 3, H, W], clips, noise + label, ...), with random weights. FLOPs are torch.utils.flop_counter's, 2 per
multiply-add; MACs = FLOPs / 2 are what MMDetection's get_flops and Paddle's flops print as "FLOPs". --shape sets
the input's spatial size (one size: square); the default is the config's export input. The table lists every module
down to --depth levels (default 3) with its parameters, FLOPs and share of the total: each operator is booked to
the module whose forward runs it (a detection head's convolutions and decoding to the head), so at every depth the
rows under a module add up to it (its "(outside submodules)" row holds its own part, never negative).
"""

from __future__ import annotations

import argparse
import os.path as osp
from collections.abc import Sequence

from oars.cli import run_cli


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("--shape", nargs="+", default=None, metavar="SIZE",
                        help="input spatial size: H W, or one size for a square input (default: the config's "
                             "export input)")
    parser.add_argument("--depth", type=int, default=3, help="levels of submodules in the table (default 3; 0: "
                        "the model only)")
    parser.add_argument("-o", "--opt", dest="overrides", nargs="+", action="extend", default=[],
                        metavar="KEY=VALUE", help="override config keys (values parsed as YAML)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)

    from oars.analysis.config_model import build_count_target, parse_shape
    from oars.errors import OarsError

    shape = parse_shape(args.shape)  # a bad --shape fails before the config is read
    if args.depth < 0:
        raise OarsError(f"--depth {args.depth}: expected 0 or more levels")
    if str(args.device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise OarsError(f"--device {args.device}: CUDA is not available on this machine; use --device cpu")
    if not osp.isfile(args.config):
        raise OarsError(f"-c {args.config}: no such config file")

    from oars.analysis.flops import count_flops, format_report
    from oars.config.check import load_checked_config
    from oars.engine.run_errors import setup_errors_are_config_errors

    cfg = load_checked_config(args.config, args.overrides)  # a misspelt type is named here, as tools/train.py does
    with setup_errors_are_config_errors(cfg):  # a value the model refuses (depth 19): one line naming the key
        target = build_count_target(cfg, shape, device=args.device)
    try:
        report = count_flops(target.module, target.inputs, target.input_names)
    except (RuntimeError, ValueError) as err:  # e.g. an input size the architecture cannot take
        shapes = ", ".join(f"{n} {list(x.shape)}" for n, x in zip(target.input_names, target.inputs))
        raise OarsError(f"{args.config}: {type(target.model).__name__} does not run on {shapes}: "
                        f"{type(err).__name__}: {str(err)[:500]}") from None
    title = f"{args.config}: {type(target.model).__name__} ({type(target.module).__name__}, random weights)"
    print(format_report(report, depth=args.depth, title=title))


if __name__ == "__main__":
    run_cli(main)
