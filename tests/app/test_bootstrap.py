"""The first run on an empty database, on a database of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.bootstrap import bootstrap_if_empty
from app.cli.database import upgrade_database
from app.core.database import session_scope
from app.core.settings import get_settings
from app.courses.service import get_course, labs_of
from app.courses.specs import list_builtin_labs
from app.users.service import authenticate, user_for_token


@pytest.fixture
def empty_database(tmp_path: Path) -> Iterator[None]:
    old = os.environ["KERNELGRADER_DATABASE_URL"]
    os.environ["KERNELGRADER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    get_settings.cache_clear()
    try:
        upgrade_database()
        yield
    finally:
        os.environ["KERNELGRADER_DATABASE_URL"] = old
        get_settings.cache_clear()


def test_first_run_creates_the_demo_course_with_every_builtin_lab(empty_database: None) -> None:
    with session_scope() as session:
        first = bootstrap_if_empty(session)
    assert first is not None
    assert sorted(first.labs) == sorted(list_builtin_labs()) and not first.skipped
    with session_scope() as session:
        course = get_course(session, slug="demo")
        # In the order a course teaches them, as the README lists them: not alphabetical.
        listed = [lab.slug for lab in labs_of(session, course=course)]
        assert listed[:4] == ["vector-scale", "hadamard", "array-sum", "array-sum-atomic"]
        assert listed == first.labs
        admin = authenticate(session, email=first.email, password=first.password)
        assert admin is not None and admin.is_site_admin  # the installation's first
        assert user_for_token(session, token=first.token) is not None
        # Only the first run does this.
        assert bootstrap_if_empty(session) is None
