"""Rewrite an exported ONNX graph into ops that OpenCV DNN 4.6 (Debian 12's libopencv-dev) can import.

Why: torch's dynamo exporter writes opset-17/18 forms that OpenCV 4.6's ONNX importer rejects or misreads,
although the same computation in older forms runs fine. Each rewrite is exact or within float rounding, and the
result is still a valid ONNX model for ONNX Runtime (the test compares both):

- ``ReduceMean(x, axes=[2, 3], keepdims=1)`` on a 4-d tensor -> ``GlobalAveragePool`` (OpenCV 4.6 ignores the
  opset-18 ``axes`` input and reduces everything: DeepLab's ASPP image pooling then fails to load).
- ``Clip(x, min, max)`` with constant bounds -> ``max - Relu(max - x)`` / ``min + Relu(x - min)`` (OpenCV 4.6
  reads only the opset-6 attribute form of Clip, and its Min/Max need two non-constant inputs).
- ``Where(cond, a, 0)`` -> ``a * Cast(cond, float)`` (OpenCV 4.6 has no Where).
- ``Unsqueeze`` with negative axes -> the same axes counted from the front (OpenCV 4.6 asserts axis >= 0).

Usage: ``python deploy/cpp/opencv_compat.py MODEL_DIR OUT_DIR [--overwrite]`` copies deploy.yaml and writes the
rewritten model.onnx (into a new folder: never over MODEL_DIR, nor over another export without --overwrite).
NonMaxSuppression (YOLOv3 with ``export.postprocess: true``) has no rewrite: export the raw graph.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from oars_deploy.deploy_config import read_deploy_yaml
from oars_deploy.deploy_writer import write_deploy_yaml
from oars_deploy.errors import run_cli
from oars_deploy.output_paths import check_export_folder, check_output_folder


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return consts


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    g = shape_inference.infer_shapes(model).graph
    values = list(g.value_info) + list(g.input) + list(g.output)
    return {v.name: len(v.type.tensor_type.shape.dim) for v in values if v.type.tensor_type.HasField("shape")}


def _reduce_axes(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> list[int] | None:
    if len(node.input) > 1 and node.input[1]:
        return consts[node.input[1]].tolist() if node.input[1] in consts else None
    for a in node.attribute:
        if a.name == "axes":
            return list(a.ints)
    return None


def opencv_compatible(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """The rewritten model and a list of what was changed (one line per rewritten node)."""
    consts, ranks = _constants(model.graph), _ranks(model)
    new: list[onnx.NodeProto] = []
    changes: list[str] = []
    for n in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "ReduceMean" and ranks.get(n.input[0]) == 4 and attrs.get("keepdims", 1) == 1:
            axes = _reduce_axes(n, consts)
            if axes is not None and sorted(a % 4 for a in axes) == [2, 3]:
                new.append(helper.make_node("GlobalAveragePool", [n.input[0]], list(n.output), name=n.name))
                changes.append(f"{n.name}: ReduceMean over H, W -> GlobalAveragePool")
                continue
        if n.op_type == "Clip" and len(n.input) > 1 and all(not i or i in consts for i in n.input[1:3]):
            x, lo, hi = (list(n.input) + ["", ""])[:3]
            out, cur = n.output[0], x
            if hi:
                new += [helper.make_node("Sub", [hi, cur], [f"{out}/hi_gap"]),
                        helper.make_node("Relu", [f"{out}/hi_gap"], [f"{out}/hi_relu"]),
                        helper.make_node("Sub", [hi, f"{out}/hi_relu"], [f"{out}/hi" if lo else out])]
                cur = f"{out}/hi"
            if lo:
                new += [helper.make_node("Sub", [cur, lo], [f"{out}/lo_gap"]),
                        helper.make_node("Relu", [f"{out}/lo_gap"], [f"{out}/lo_relu"]),
                        helper.make_node("Add", [f"{out}/lo_relu", lo], [out])]
            changes.append(f"{n.name}: Clip -> Relu form")
            continue
        if n.op_type == "Where" and n.input[2] in consts and not consts[n.input[2]].any():
            mask = f"{n.output[0]}/mask"
            new += [helper.make_node("Cast", [n.input[0]], [mask], to=TensorProto.FLOAT),
                    helper.make_node("Mul", [n.input[1], mask], list(n.output))]
            changes.append(f"{n.name}: Where(c, a, 0) -> a * Cast(c)")
            continue
        if (n.op_type == "Unsqueeze" and len(n.input) > 1 and n.input[1] in consts
                and (consts[n.input[1]] < 0).any() and n.input[0] in ranks):
            axes = consts[n.input[1]].reshape(-1)
            rank = ranks[n.input[0]] + axes.size
            name = f"{n.name}/axes"
            model.graph.initializer.append(numpy_helper.from_array(np.where(axes < 0, axes + rank, axes), name))
            new.append(helper.make_node("Unsqueeze", [n.input[0], name], list(n.output), name=n.name))
            changes.append(f"{n.name}: Unsqueeze negative axes -> positive")
            continue
        new.append(n)
    del model.graph.node[:]
    model.graph.node.extend(new)
    return model, changes


def convert_model_dir(model_dir: str, out_dir: str, overwrite: bool = False) -> list[str]:
    """MODEL_DIR (deploy.yaml + its FP32 graph) -> OUT_DIR with the rewritten graph as model.onnx and a deploy.yaml
    that names it (OpenCV DNN runs FP32 graphs; an FP16/INT8 export keeps its FP32 graph as model.onnx_fp32).

    OUT_DIR may not be, hold or lie inside MODEL_DIR (the source export would be rewritten in place), and an
    OUT_DIR that holds an export is replaced only with ``overwrite``: the rule of tools/export.py."""
    check_output_folder(out_dir, model_dir, flag="OUT_DIR", input_flag="MODEL_DIR")
    check_export_folder(out_dir, overwrite, flag="OUT_DIR")
    deploy = read_deploy_yaml(osp.join(model_dir, "deploy.yaml"))
    meta = deploy["model"]
    source = meta.get("onnx_fp32") or meta.get("onnx", "model.onnx")
    model, changes = opencv_compatible(onnx.load(osp.join(model_dir, source)))
    onnx.checker.check_model(model)
    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, osp.join(out_dir, "model.onnx"))
    for key in ("onnx_fp32", "agreement_with_fp32", "engine"):
        meta.pop(key, None)
    meta.update(onnx="model.onnx", precision="fp32")
    write_deploy_yaml(osp.join(out_dir, "deploy.yaml"), deploy)
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", help="folder written by tools/export.py (deploy.yaml + model.onnx)")
    parser.add_argument("out_dir", help="where to write deploy.yaml + the rewritten model.onnx")
    parser.add_argument("--overwrite", action="store_true", help="replace the export already in OUT_DIR")
    args = parser.parse_args()
    changes = convert_model_dir(args.model_dir, args.out_dir, overwrite=args.overwrite)
    print("\n".join(changes) if changes else "nothing to rewrite")


if __name__ == "__main__":
    run_cli(main)
