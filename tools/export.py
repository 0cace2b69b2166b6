"""Export a trained model: tools/export.py -c CONFIG -w CKPT --format onnx|tensorrt|openvino|ort|ncnn|mnn|litert
[-o OUT_DIR]
[--dynamic] [--half | --int8 --calib-dir DIR [--calib-num N] [--calib-method entropy|minmax|percentile]]
[--min-agreement X] [--opset N] [--overwrite] [TASK FLAGS].

Writes OUT_DIR/model.onnx and OUT_DIR/deploy.yaml (default OUT_DIR: work_dirs/<config name>/export), and
model.engine for --format tensorrt. A folder that already holds an export is left alone unless --overwrite is given
(the message names the model and its deploy.yaml's exported_at). The export checks itself: ONNX Runtime must
reproduce PyTorch on a sample input, or the export fails. --half / --int8 also write model_fp16.onnx /
model_int8.onnx (the precision is in the graph: FP16 tensors, or Q/DQ nodes calibrated on --calib-dir; --int8 is
for image models), which must agree with the FP32 graph (export.min_agreement, default 0.99 / 0.9); deploy.yaml
then points the predictors and TensorRT at that file.
--format openvino (model.xml + model.bin; --half: FP16 weights, --int8: NNCF calibrated on --calib-dir) and
--format ort (ONNX Runtime's mobile format: model.ort + required_operators.config, from the graph deploy.yaml runs),
--format ncnn (pnnx: model.ncnn.param + .bin; --half: FP16 weights), --format mnn (model.mnn; --half: FP16, --int8:
8-bit weights) and --format litert (model.tflite, converted in a virtual environment of its own; docs/deploy.md)
are written from model.onnx, which stays as the reference: each is run on the self-check inputs next to ONNX
Runtime FP32 and the export fails (nothing renamed into place) below --min-agreement (default per precision and
output kind: FP32 0.999 dense / 0.99 labels / 0.95 matched detections; FP16 0.99; INT8 0.9). The result is printed
("openvino FP32 vs ONNX Runtime: max abs diff 3.1e-06 (agreement 1.000)") and kept in deploy.yaml's ``parity``.
``-o`` also takes ``key=value`` config overrides, as on every tool:
``-o out/ export.input_shape=[1,3,256,256] export.output_op=softmax``. The config's task may add flags of its own
(each one sets the ``export`` key of the same name): tools/export.py -c CONFIG --help lists them.
"""

import argparse
import os.path as osp
from collections.abc import Sequence

from oars.cli import run_cli, split_output_and_overrides
from oars.export.guards import DEFAULT_OPSET, MIN_OPSET


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("-w", "--weights", required=True, help="checkpoint")
    parser.add_argument("--format", default="onnx",
                        help="onnx (default), tensorrt, openvino (OpenVINO IR), ort (ONNX Runtime mobile), ncnn, mnn "
                        "or litert (LiteRT / TFLite)")
    parser.add_argument("--min-agreement", type=float, default=None,
                        help="agreement with ONNX Runtime FP32 below which an edge-format export (and a --half / "
                        "--int8 graph) fails (default: per precision and output kind, see above)")
    parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[],
                        metavar="OUT_DIR|KEY=VALUE", help="output folder and/or config overrides")
    parser.add_argument("--output-dir", default=None, help="output folder (alternative to -o OUT_DIR)")
    parser.add_argument("--dynamic", action="store_true", help="dynamic batch axis (exported at the config's batch)")
    parser.add_argument("--half", action="store_true", help="also an FP16 graph, model_fp16.onnx (and engine)")
    parser.add_argument("--int8", action="store_true", help="also an INT8 (Q/DQ) graph, model_int8.onnx (and engine), "
                        "calibrated on --calib-dir")
    parser.add_argument("--calib-dir", default=None, help="folder of calibration data for --int8: images "
                        "(videos for a clip classifier), like the deployment data")
    parser.add_argument("--calib-num", type=int, default=None,
                        help="calibrate on the first N files of --calib-dir (default: all)")
    parser.add_argument("--calib-method", default="entropy", choices=["entropy", "minmax", "percentile"],
                        help="how --int8 sets activation ranges (default entropy)")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                        help=f"ONNX opset, {MIN_OPSET} to the newest the onnx package knows (default {DEFAULT_OPSET})")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the export already in the output folder (default: stop and say what is there)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the device the model is traced on)")
    parser.add_argument("--no-check", action="store_true", help="skip the ONNX Runtime vs PyTorch self-check")
    from oars.config.check import load_checked_config
    from oars.task_flags import parse_task_command_line

    line = parse_task_command_line(parser, argv,
                                   lambda task, group: task.default_kind.exporter.export_arguments(group), "export",
                                   load_checked_config)
    args = line.args
    stem = osp.splitext(osp.basename(args.config))[0]
    out_dir, _ = split_output_and_overrides(args.values, args.output_dir,
                                                    default=osp.join("work_dirs", stem, "export"))

    from oars.pipelines.export import export_model

    result = export_model(line.cfg, args.weights, out_dir, fmt=args.format, dynamic=args.dynamic,
                          opset=args.opset, half=args.half, int8=args.int8, calib_dir=args.calib_dir,
                          calib_method=args.calib_method, calib_num=args.calib_num,
                          check=not args.no_check, device=args.device,
                          overwrite=args.overwrite, task_options=line.task_values, min_agreement=args.min_agreement)
    for key in ("onnx", "precision_onnx", "deploy", "engine"):
        if key in result:
            print(f"wrote {result[key]}")
    for path in result.get("extra_files", []):  # a second graph of the export (a localiser's recognizer)
        print(f"wrote {path}")
    print(format_check(result.get("check")))
    if "format" in result:
        print(format_lines(result["format"]))


def format_lines(written: dict) -> str:
    """An edge format's files, its parity line and its notes (the mobile-usability verdict)."""
    lines = [f"wrote {path}" for path in written["files"]]
    lines.append(written["parity"]["line"])
    lines.extend(written["notes"])
    return "\n".join(lines)


def format_check(check: dict | None) -> str:
    """One line per output: the max abs difference ONNX Runtime vs PyTorch and its tolerance."""
    if not check:
        return "self-check: skipped (--no-check)"
    lines = [f"self-check passed (ONNX Runtime vs PyTorch); preprocessing max abs diff "
             f"{check.get('preprocess_max_abs_diff', 0.0):.3g}"]
    parts = [("", check["outputs"])]
    if "dynamic_batch" in check:
        parts.append((f" [batch {check['dynamic_batch']['batch']}]", check["dynamic_batch"]["outputs"]))
    for suffix, outputs in parts:
        for name, r in outputs.items():
            lines.append(f"  {name}{suffix}: max abs diff {r['max_abs_diff']:.3g} (tolerance {r['tolerance']:.3g})")
    if "precision" in check:
        p = check["precision"]
        values = ", ".join(f"{k} {'not measured' if v is None else f'{v:.4f}'}" for k, v in p["agreement"].items())
        lines.append(f"{p['precision'].upper()} vs FP32 graph: agreement {values} (needed {p['min_agreement']:g})")
    return "\n".join(lines)


if __name__ == "__main__":
    run_cli(main)
