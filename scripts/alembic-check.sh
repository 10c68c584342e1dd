#!/usr/bin/env bash
# Upgrade an empty database to head, then ask Alembic whether the models match the migrations.
set -euo pipefail
cd "$(dirname "$0")/.."
alembic upgrade head
alembic check
