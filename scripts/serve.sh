#!/usr/bin/env bash
# Install kernelgrader into .venv and serve it on the embedded default (SQLite, a local worker).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "The kernelgrader command is .venv/bin/kernelgrader; in another terminal," \
     "'source .venv/bin/activate' puts it on PATH (the README's commands are written so)." >&2
exec .venv/bin/kernelgrader serve "$@"
