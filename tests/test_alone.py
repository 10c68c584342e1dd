"""The tests scripts/test.sh runs alone are named by paths that exist (a renamed file would
otherwise run beside the others, and its time limits with it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ALONE

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("where", ALONE)
def test_each_path_run_alone_exists(where: str) -> None:
    path = ROOT / where
    assert path.is_dir() if where.endswith("/") else path.is_file(), where
