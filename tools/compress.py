"""Compress a trained model: tools/compress.py -c CONFIG -w CKPT --method prune|auto-prune|sensitivity|ptq|qat|distill
--work-dir DIR [--target-flops F | --target-params P | --target-latency MS [--latency-threads N]] [--search sa|optuna]
[--criterion l1|l2|taylor] [--round-to N] [--steps N] [--epochs N] [--calib-dir DIR] [--variant NAME]
[-o key=value ...].

prune: structured channel pruning of the backbone and neck (torch-pruning's dependency graph; the heads keep their
output channels) until the model has at most F of the original FLOPs (--target-flops 0.5: half) or P of its
parameters, in N steps (importance estimated again before each), then fine-tuning through the normal runner for
--epochs (the config's schedule when not given; 0: none). The result is an ordinary config and checkpoint:
DIR/<variant>/pruned_config.yaml and the fine-tuning's checkpoints, which tools/eval.py, infer.py and export.py
take as they are. Re-running continues (the pruned model is not recomputed; fine-tuning resumes).
auto-prune: a search over per-group prune ratios (layers grouped by stage/block) under --target-flops F or
--target-latency MS (ONNX Runtime on this machine), each candidate scored by the validation metric on a few batches
after BatchNorm re-calibration; simulated annealing as PaddleSlim's (--search sa, the default) or Optuna's TPE
(--search optuna), --steps candidates (default 300); the best is written, fine-tuned and measured as prune's.
sensitivity: the metric per layer group pruned by 0.1 ... 0.9 (DIR/sensitivity.json and .png, a row of text).
ptq: the INT8 export of tools/export.py --int8 (calibrated on --calib-dir), its metric from that export as deployed
(oars.pipelines.compress.ptq): the row QAT is compared with.
qat / distill: quantisation-aware training and distillation (oars.pipelines.compress.qat / .distill).

Every run adds a row (and the original one) to DIR/compression.md and DIR/compression.json: parameters, FLOPs,
ONNX Runtime latency (FP32; INT8 when the export has model_int8.onnx), size on disk and the validation metric;
the table is printed and put into DIR/report.html when there is one. Every option can also be written in the
config's ``compress:`` section (same names with underscores; the command line wins), plus ``scope`` (module paths
to prune, default [backbone, neck]), ``ignore``, ``max_layer_ratio`` (default 0.9), ``round_to``, ``global_pruning``,
``export`` and ``latency`` (true/false).
"""

from __future__ import annotations

from collections.abc import Sequence

from oars.cli import base_parser, run_cli
from oars.compress.options import merged_options
from oars.config.check import load_checked_config
from oars.errors import OarsError
from oars.pipelines.compress import METHODS, compress


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__)
    parser.add_argument("-w", "--weights", required=True, help="the trained checkpoint to compress")
    parser.add_argument("--method", choices=list(METHODS), default=None,
                        help="compression method (or compress.method in the config)")
    parser.add_argument("--target-flops", type=float, default=None,
                        help="prune: keep at most this fraction of the original FLOPs (0.5 = -50%%)")
    parser.add_argument("--target-params", type=float, default=None,
                        help="prune: keep at most this fraction of the original parameters")
    parser.add_argument("--criterion", choices=["l1", "l2", "taylor"], default=None,
                        help="prune: channel importance (weight L1/L2 norm, or first-order Taylor on a batch)")
    parser.add_argument("--target-latency", type=float, default=None,
                        help="auto-prune: the ONNX Runtime latency budget in ms, measured on this machine")
    parser.add_argument("--latency-threads", type=int, default=None,
                        help="auto-prune: ONNX Runtime intra-op threads for the budget's and every candidate's "
                             "latency (default 1; 0: ONNX Runtime's default, all cores)")
    parser.add_argument("--round-to", type=int, default=None,
                        help="prune / auto-prune: keep every pruned layer's channel count a multiple of N (8 for a "
                             "latency target: the widths CPU convolution kernels run at full speed; default: none)")
    parser.add_argument("--search", choices=["sa", "optuna"], default=None,
                        help="auto-prune: simulated annealing (PaddleSlim's, default) or Optuna's TPE")
    parser.add_argument("--steps", type=int, default=None,
                        help="prune: reach the target in N pruning steps; auto-prune: N search candidates (300)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="fine-tuning length (train_cfg.max_epochs, or max_iters for an iteration loop); 0: none")
    parser.add_argument("--calib-dir", default=None,
                        help="ptq: calibration files like the deployment data: images, or videos for a clip "
                        "classifier (qat: the files its INT8 graph is checked on)")
    parser.add_argument("--variant", default=None, help="the variant's name in the table (default: from options)")
    parser.add_argument("--teacher-config", default=None, help="distill: the teacher's config (-c/-w are the student)")
    parser.add_argument("--teacher-weights", default=None, help="distill: the teacher's trained checkpoint")
    args = parser.parse_args(argv)

    if not args.work_dir:
        raise OarsError("--work-dir DIR is required: the compressed variants and their table live there")
    cfg = load_checked_config(args.config, args.overrides)
    cli = {"method": args.method, "target_flops": args.target_flops, "target_params": args.target_params,
           "criterion": args.criterion, "steps": args.steps, "round_to": args.round_to,
           "target_latency": args.target_latency, "latency_threads": args.latency_threads, "search": args.search,
           "epochs": args.epochs, "variant": args.variant,
           "teacher_config": args.teacher_config, "teacher_weights": args.teacher_weights,
           "calib_dir": args.calib_dir}
    compress(cfg, args.weights, args.work_dir, merged_options(cfg, cli), args.overrides)


if __name__ == "__main__":
    run_cli(main)
