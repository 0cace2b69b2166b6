#!/usr/bin/env bash
# Wheels for a GPU machine that has CUDA, PyTorch, CuPy and ONNX Runtime but cannot reach a package index (the
# lent H200 machines: Python 3.12, x86_64): the packages oars needs beyond those, at the versions this checkout's
# .venv runs, downloaded here into .whl/ (ignored by git). tools/gpu_checks.sh installs them from there.
# Usage: tools/gpu_wheels.sh [PYTHON_VERSION]   (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.12}
PY=${PY:-.venv/bin/python}
NEEDED="onedl-mmengine addict yapf platformdirs termcolor albumentations albucore pydantic pydantic-core
annotated-types typing-inspection typing-extensions stringzilla simsimd pycocotools"
mkdir -p .whl
rm -f .whl/*.whl
platforms=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms="$platforms --platform $p"
done
for name in $NEEDED; do
    version=$($PY -c "import importlib.metadata as m; print(m.version('$name'))")
    # shellcheck disable=SC2086
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp $platforms \
        -d .whl "$name==$version"
done
du -sh .whl
