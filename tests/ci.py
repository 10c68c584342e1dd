"""Under CI a test that needs something CI provides fails where elsewhere it would skip.

`.ci/run` runs as root and installs or starts what the tests need (PostgreSQL, Redis, Chromium,
Docker's tools, ...): a skip there would hide that a test never ran. Standard library and pytest
only, so tests/graders can use it on a bare GPU host.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip with `reason`; under CI fail with it instead."""
    if in_ci():
        pytest.fail(f"{reason}. CI provides this (see .ci/run), so the test must run there.")
    pytest.skip(reason)
