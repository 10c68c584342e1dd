"""A worker run as root says once what that means for its sandbox and what to do, in place of
Celery's warning that names an option kernelgrader does not have; every other warning still
shows (issue 36, item 9). Run as root where CI runs; as another user, the sentence is absent."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import pytest
from celery.exceptions import SecurityWarning
from celery.platforms import ASSUMING_ROOT, ROOT_DISCOURAGED

from app.grading.privileges import as_root_sentence, leave_out_celerys_root_warning
from graders.sandbox.isolation import SANDBOX_USER_ENV, unprivileged_user


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    unprivileged_user.cache_clear()
    yield
    unprivileged_user.cache_clear()


def test_as_root_the_sentence_says_whether_the_sandbox_drops_privileges_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    if os.geteuid() != 0:
        assert as_root_sentence() is None
        return
    monkeypatch.setenv(SANDBOX_USER_ENV, "")
    off = as_root_sentence()
    assert off is not None
    assert off.startswith("This worker runs as root, and its sandbox cannot drop privileges")
    assert f"{SANDBOX_USER_ENV} is empty" in off and "Run the worker as an ordinary user" in off
    unprivileged_user.cache_clear()
    monkeypatch.setenv(SANDBOX_USER_ENV, "no-such-user-kg")
    missing = as_root_sentence()
    assert missing is not None and "there is no user 'no-such-user-kg'" in missing
    unprivileged_user.cache_clear()
    monkeypatch.delenv(SANDBOX_USER_ENV)
    creds, why = unprivileged_user()
    default = as_root_sentence()
    assert default is not None
    if creds is not None:  # nobody can run this interpreter here
        assert f"compiles each kernel as the unprivileged user {creds.name}" in default
        assert "running a kernel on the GPU stays root" in default
    else:
        assert why in default and "cannot drop privileges" in default


def test_only_celerys_root_warning_is_left_out() -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        leave_out_celerys_root_warning()
        warnings.warn(
            SecurityWarning(ROOT_DISCOURAGED.format(uid=0, euid=0, gid=0, egid=0)), stacklevel=1
        )
        warnings.warn(SecurityWarning(ASSUMING_ROOT), stacklevel=1)
        warnings.warn("a deprecation of our own", DeprecationWarning, stacklevel=1)
    texts = [str(w.message) for w in shown]
    assert not any("superuser privileges" in t for t in texts), texts
    assert any("entry for the specified gid" in t for t in texts), texts
    assert "a deprecation of our own" in texts
