"""Compress a trained model: tools/compress.py -c CONFIG -w CKPT --method prune|ptq|qat|distill --work-dir DIR
[--target-flops F | --target-params P] [--criterion l1|l2|taylor] [--steps N] [--epochs N] [--calib-dir DIR]
[--variant NAME] [-o key=value ...].

prune: structured channel pruning of the backbone and neck (torch-pruning's dependency graph; the heads keep their
output channels) until the model has at most F of the original FLOPs (--target-flops 0.5: half) or P of its
parameters, in N steps (importance estimated again before each), then fine-tuning through the normal runner for
--epochs (the config's schedule when not given; 0: none). The result is an ordinary config and checkpoint:
DIR/<variant>/pruned_config.yaml and the fine-tuning's checkpoints, which tools/eval.py, infer.py and export.py
take as they are. Re-running continues (the pruned model is not recomputed; fine-tuning resumes).
ptq: the INT8 export of tools/export.py --int8 (calibrated on --calib-dir), its metric from that export as deployed
(oars.compress.ptq): the row QAT is compared with.
qat / distill: quantisation-aware training and distillation (oars.compress.qat / oars.compress.distill).

Every run adds a row (and the original one) to DIR/compression.md and DIR/compression.json: parameters, FLOPs,
ONNX Runtime latency (FP32; INT8 when the export has model_int8.onnx), size on disk and the validation metric;
the table is printed and put into DIR/report.html when there is one. Every option can also be written in the
config's ``compress:`` section (same names with underscores; the command line wins), plus ``scope`` (module paths
to prune, default [backbone, neck]), ``ignore``, ``max_layer_ratio`` (default 0.9), ``round_to``, ``global_pruning``,
``export`` and ``latency`` (true/false).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from oars.cli import base_parser, run_cli

_METHOD_MODULES = {"ptq": ("oars.compress.ptq", "run_ptq"), "qat": ("oars.compress.qat", "run_qat"),
                   "distill": ("oars.compress.distill", "run_distill")}
# the optional packages each method imports (pyproject.toml's extras; oars.extras says which one installs them)
_METHOD_PACKAGES = {"prune": ("torch_pruning",), "qat": ("torchao",), "ptq": ("onnx", "onnxruntime"),
                    "distill": ()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__)
    parser.add_argument("-w", "--weights", required=True, help="the trained checkpoint to compress")
    parser.add_argument("--method", choices=["prune", "ptq", "qat", "distill"], default=None,
                        help="compression method (or compress.method in the config)")
    parser.add_argument("--target-flops", type=float, default=None,
                        help="prune: keep at most this fraction of the original FLOPs (0.5 = -50%%)")
    parser.add_argument("--target-params", type=float, default=None,
                        help="prune: keep at most this fraction of the original parameters")
    parser.add_argument("--criterion", choices=["l1", "l2", "taylor"], default=None,
                        help="prune: channel importance (weight L1/L2 norm, or first-order Taylor on a batch)")
    parser.add_argument("--steps", type=int, default=None, help="prune: reach the target in N pruning steps")
    parser.add_argument("--epochs", type=int, default=None,
                        help="fine-tuning length (train_cfg.max_epochs, or max_iters for an iteration loop); 0: none")
    parser.add_argument("--calib-dir", default=None,
                        help="ptq: calibration files like the deployment data: images, or videos for a clip "
                        "classifier (qat: the files its INT8 graph is checked on)")
    parser.add_argument("--variant", default=None, help="the variant's name in the table (default: from options)")
    parser.add_argument("--teacher-config", default=None, help="distill: the teacher's config (-c/-w are the student)")
    parser.add_argument("--teacher-weights", default=None, help="distill: the teacher's trained checkpoint")
    args = parser.parse_args(argv)

    from oars.compress.options import merged_options
    from oars.config.check import load_checked_config
    from oars.errors import OarsError
    from oars.extras import require_extra

    if not args.work_dir:
        raise OarsError("--work-dir DIR is required: the compressed variants and their table live there")
    cfg = load_checked_config(args.config, args.overrides)
    cli = {"method": args.method, "target_flops": args.target_flops, "target_params": args.target_params,
           "criterion": args.criterion, "steps": args.steps, "epochs": args.epochs, "variant": args.variant,
           "teacher_config": args.teacher_config, "teacher_weights": args.teacher_weights,
           "calib_dir": args.calib_dir}
    options = merged_options(cfg, cli)
    method = options["method"]
    for package in _METHOD_PACKAGES[method]:  # before anything slow: one line naming the extra, not a traceback
        require_extra(package, f"tools/compress.py --method {method}")
    if method == "prune":
        from oars.compress.prune_run import run_prune

        run_prune(cfg, args.weights, args.work_dir, options, args.overrides)
        return
    module_name, fn_name = _METHOD_MODULES[method]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise OarsError(f"--method {method}: {module_name} is not installed in this checkout") from None
    extra = {"overrides": args.overrides} if method == "ptq" else {}
    result = getattr(module, fn_name)(cfg, args.weights, args.work_dir, options, **extra)
    _record(args.work_dir, result, cfg.filename, args.weights, args.overrides, options)


def _record(work_dir: str, result: object, config: str, weights: str, overrides: list, options: dict) -> None:
    """A method's returned row (``result['row']``) goes into the table, replacing the row of an earlier run of the
    same variant, and the original model's row is measured once for every method (the row each variant is
    compared with)."""
    import os.path as osp

    from oars.compress.table import add_row, format_rows, has_row, read_rows
    from oars.compress.variants import measure_variant

    if not has_row(work_dir, "original"):
        add_row(work_dir, measure_variant(config, weights, osp.join(work_dir, "original"), "original", "-",
                                          overrides, options))

    row = result.get("row") if isinstance(result, dict) else None
    if isinstance(row, dict) and row.get("variant"):  # a re-run replaces its row (measured again, e.g. resumed)
        add_row(work_dir, row)
    rows = read_rows(work_dir)
    if rows:
        print(format_rows(rows))


if __name__ == "__main__":
    run_cli(main)
