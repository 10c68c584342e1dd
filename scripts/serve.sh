#!/usr/bin/env bash
# Install kernelgrader into .venv and serve it on the embedded default (SQLite, a local worker).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/kernelgrader serve "$@"
