#!/usr/bin/env bash
# Install everything the tests need into .venv, then lint, type-check, check the import direction
# and the migrations, run pytest.
# Extra arguments go to one plain pytest run instead of the whole suite, e.g. scripts/test.sh -m gpu
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh dev
export PATH="$PWD/.venv/bin:$PATH"
ruff check app migrations graders tests bench setup.py
ruff format --check app migrations graders tests bench setup.py
mypy
python scripts/import_check.py
KERNELGRADER_DATABASE_URL="sqlite:///$(mktemp -d)/alembic-check.db" scripts/alembic-check.sh
if [ "$#" -gt 0 ]; then
    exec pytest "$@"
fi
# The whole suite: most of it in two processes (pytest-xdist; each takes every other test file,
# always the same ones in the same order, as tests/conftest.py groups them; CI's machine has two
# cores), then the tests marked `alone` (time limits and answer times, named in tests/conftest.py)
# in one process with nothing beside them. Both parts always run; the script fails if either does.
status=0
pytest -n 2 --dist loadgroup -m "not alone" || status=$?
pytest -m alone || status=$?
exit "$status"
