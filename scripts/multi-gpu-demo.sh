#!/usr/bin/env bash
# The two-GPU run, on the lent nvidia-h200-x2 (Python 3.12, CuPy, NumPy; no index, no web
# stack): install the carried wheels (.whl, made here by scripts/device_wheels.py), then run
# scripts/multi_gpu_demo.py, its log and results under $OUT. See README "GPU tests".
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/kernelgrader-multi-gpu}"
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/kernelgrader-site .whl/*.whl
    export PYTHONPATH="/tmp/kernelgrader-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:$PYTHONPATH"
set -o pipefail
python3 scripts/multi_gpu_demo.py --out "$out" "$@" 2>&1 | tee "$out/multi_gpu_demo.log"
