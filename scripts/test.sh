#!/usr/bin/env bash
# Install everything the tests need into .venv, then lint, type-check, check the import direction
# and the migrations, run pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -m gpu
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh dev
export PATH="$PWD/.venv/bin:$PATH"
ruff check app migrations graders tests bench setup.py
ruff format --check app migrations graders tests bench setup.py
mypy
python scripts/import_check.py
KERNELGRADER_DATABASE_URL="sqlite:///$(mktemp -d)/alembic-check.db" scripts/alembic-check.sh
exec pytest "$@"
