"""Train a model from a YAML config: tools/train.py -c CONFIG [-o key=value ...] [--compile] [--channels-last]
[--print-config] [-v]."""

import argparse

from oars.cli import base_parser, run_cli
from oars.engine.runner import verbose_console
from oars.engine.tracking import logger_names
from oars.pipelines.train import print_config, train


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--resume", nargs="?", const=True, default=None, metavar="CKPT",
                        help="continue from the latest checkpoint in the work dir, or from CKPT")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a work dir that holds checkpoints: delete its epoch_N/iter_N/best_*"
                             ".pth and last_checkpoint first (without it, such a work dir is refused)")
    parser.add_argument("--amp", action="store_true",
                        help="mixed precision: FP16 + dynamic loss scaling on CUDA, bfloat16 on CPU")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the training step (config key `compile`: true or {mode, dynamic, "
                             "backend}); the log reports graphs and graph breaks after the first step")
    parser.add_argument("--channels-last", action="store_true",
                        help="store the 2-D convolutions' weights channels-last (NHWC) when training starts: faster "
                             "full-size convolution networks on the CPU (oneDNN; measured in docs/compression.md, "
                             "CUDA not measured) (config key `channels_last`)")
    parser.add_argument("--logger", action="append", default=[], metavar="NAME[,NAME]",
                        help="track the run with mlflow, wandb, tensorboard or clearml (repeatable or a comma list; "
                             "config key `loggers`; defaults in configs/_base_/loggers.yaml; pip install -e .[track])")
    parser.add_argument("--launcher", choices=["none", "pytorch"], default="none",
                        help="'pytorch' under torchrun for multi-process training")
    parser.add_argument("--print-config", action="store_true",
                        help="print the config this run would use (what <work_dir>/config.yaml will hold, with the "
                             "source of every value oars sets under _resolved_by_oars) and exit without training "
                             "or creating the work dir")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print mmengine's full set-up dump (environment, resolved config, hook order) before "
                             "training; without it the console shows what runs, where it writes, the progress and "
                             "the metrics (the dump is in the run's log file, the config in <work_dir>/config.yaml)")
    parser.add_argument("--data", default=None, metavar="DATA_YAML",
                        help="train on the data set this description file names (format, root, train/val/test, "
                             "names; an ultralytics data.yaml as is): sets every loader's dataset type, root, split "
                             "and classes and the model's num_classes (docs/training.md, 'One data switch')")
    parser.add_argument("--local-rank", "--local_rank", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.print_config:
        print(print_config(args.config, args.overrides, work_dir=args.work_dir, resume=args.resume, amp=args.amp,
                           launcher=args.launcher, compile=args.compile, loggers=logger_names(args.logger),
                           channels_last=args.channels_last, data=args.data), end="")
        return
    with verbose_console(args.verbose):
        train(args.config, args.overrides, work_dir=args.work_dir, resume=args.resume, amp=args.amp,
              launcher=args.launcher, overwrite=args.overwrite, compile=args.compile,
              loggers=logger_names(args.logger), channels_last=args.channels_last, data=args.data)


if __name__ == "__main__":
    run_cli(main)
