#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run (CI has none): the gpu-marked tests (TensorRT engines vs ONNX
# Runtime when the tensorrt package is there, CuPy pre/post-processing, the CUDA predictor), CUDA AMP training, and
# the benchmarks on CUDA. Usage: tools/gpu_checks.sh [OUT_DIR]
#
# Works on a machine without a package index: with a .whl/ folder (made here by tools/gpu_wheels.sh) it installs
# those wheels into /tmp/site and runs this checkout from its folder with the machine's own python3, PyTorch and
# CuPy; otherwise it uses .venv (PY=... to choose). Every step runs even when an earlier one failed; the exit
# status is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-work_dirs/gpu_checks}
mkdir -p "$out"
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
failed=0
step() {  # step NAME CMD...: run, log to $out/NAME.txt, count failures
    local name=$1
    shift
    echo "== $name: $*"
    if ! "$@" 2>&1 | tee "$out/$name.txt"; then
        echo "== $name FAILED"
        failed=$((failed + 1))
    fi
}
step env $PY -c "import torch, onnxruntime, importlib.util as u; assert torch.cuda.is_available(), 'no CUDA device'; \
print(torch.__version__, torch.cuda.get_device_name(0), 'onnxruntime', onnxruntime.__version__, \
onnxruntime.get_available_providers(), 'tensorrt', bool(u.find_spec('tensorrt')), 'cupy', bool(u.find_spec('cupy')))"
step pytest_gpu $PY -m pytest -q -m gpu -rs -p no:cacheprovider tests
step demo_data $PY -m oars.data.demo_shapes --out data/demo_shapes
step amp_train $PY tools/train.py -c configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml --amp --overwrite \
    --work-dir "$out/amp_det" -o train_cfg.max_epochs=2 train_cfg.val_interval=2
step train_step $PY benchmarks/train_step.py --device cuda
step infer_latency $PY benchmarks/infer_latency.py --device cuda --runs 20
exit $failed
