#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run (CI has none): CUDA FP16 training, the gpu-marked tests
# (TensorRT engines vs ONNX Runtime, FP16 export, CuPy pre-processing, CUDA predictor), and the latency table
# with TensorRT. Usage: tools/gpu_checks.sh [OUT_DIR]   (needs `pip install tensorrt cupy-cuda12x` for all of it)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-work_dirs/gpu_checks}
mkdir -p "$out"
PY=${PY:-.venv/bin/python}
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
$PY -m pip install -q tensorrt cupy-cuda12x 2>&1 | tail -2 || true
$PY -m pytest -q -m gpu -rs 2>&1 | tee "$out/pytest_gpu.txt"
$PY tools/train.py -c configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml --amp --work-dir "$out/amp_det" \
    -o train_cfg.max_epochs=2 train_cfg.val_interval=2 2>&1 | tail -20 | tee "$out/amp_train.txt"
$PY benchmarks/train_step.py --device cuda 2>&1 | tail -5 | tee "$out/train_step.txt"
$PY benchmarks/infer_latency.py --device cuda 2>&1 | tail -20 | tee "$out/infer_latency.txt"
