#!/usr/bin/env bash
# Create .venv (once) and install kernelgrader into it with `sso` (LTI and single sign-on)
# and the given extras, e.g. "dev".
# KERNELGRADER_CUDA picks CuPy's CUDA major version: cuda13 (default) or cuda12.
# A stamp per (pyproject.toml and setup.py, extras) skips the install when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${KERNELGRADER_CUDA:-cuda13},sso${1:+,$1}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
# setup.py too: its package mapping (app.migrations) is written into the editable install.
hash="$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
stamp=".venv/.installed-${hash}-${extras//,/_}"
if [ ! -e "$stamp" ]; then
    echo "Installing kernelgrader[${extras}] into .venv (the first time takes a few minutes)..." >&2
    log=".venv/install.log"
    if ! { .venv/bin/python -m pip install --upgrade pip \
           && .venv/bin/python -m pip install -e ".[${extras}]"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "Installing failed; the whole log is in $log." >&2
        exit 1
    fi
    # Stamps of older build files no longer say anything; stamps of other extras do.
    find .venv -maxdepth 1 -name '.installed-*' ! -name ".installed-${hash}-*" -delete
    touch "$stamp"
    # On a GPU host, the CuPy kernel cache is built once now (a minute), not by a worker
    # before its first job; it is kept outside the data folder, so every worker reuses it.
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        echo "Building the CuPy kernel cache for this host's GPUs (once)..." >&2
        .venv/bin/python -m graders warm-cache >&2 \
            || echo "The CuPy kernel cache was not built now; a GPU worker builds it before it takes jobs." >&2
    fi
fi
