#!/usr/bin/env bash
# Create .venv (once) and install kernelgrader into it with the given extras, e.g. "cuda13,dev".
# KERNELGRADER_CUDA picks CuPy's CUDA major version: cuda13 (default) or cuda12.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${KERNELGRADER_CUDA:-cuda13}${1:+,$1}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)-${extras//,/_}"
if [ ! -e "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[${extras}]"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
