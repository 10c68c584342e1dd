"""Lowering a CPU child's scheduling group: the kernel answers EAGAIN to all but one such
change per 0.1 s across the host (for a process without CAP_SYS_ADMIN there, as a
container's root is), so the child tries again a bounded number of times. The kernel's
refusal cannot be had on demand, so os.write stands in for it here, over a plain file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from graders.sandbox import isolation
from graders.sandbox.isolation import AUTOGROUP_TRIES, _lower_autogroup


def _refusing(
    monkeypatch: pytest.MonkeyPatch, refusals: int, code: int = errno.EAGAIN
) -> list[int]:
    """os.write refuses the first `refusals` writes with `code`; returns the tries seen."""
    real = os.write
    tries: list[int] = []

    def write(fd: int, data: bytes) -> int:
        tries.append(fd)
        if len(tries) <= refusals:
            raise OSError(code, os.strerror(code))  # EAGAIN makes a BlockingIOError
        return real(fd, data)

    monkeypatch.setattr(isolation.os, "write", write)
    monkeypatch.setattr(isolation, "AUTOGROUP_PAUSE_S", 0.0)
    return tries


@pytest.mark.parametrize(
    ("refusals", "code", "tries", "written"),
    [
        (AUTOGROUP_TRIES - 1, errno.EAGAIN, AUTOGROUP_TRIES, "10"),  # tried again after EAGAIN
        (AUTOGROUP_TRIES, errno.EAGAIN, AUTOGROUP_TRIES, ""),  # gives up, the start goes on
        (1, errno.EPERM, 1, ""),  # another refusal is not tried again
    ],
    ids=["tries-again-after-eagain", "gives-up-after-its-tries", "other-refusal-once"],
)
def test_the_group_is_lowered_within_its_tries(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    refusals: int,
    code: int,
    tries: int,
    written: str,
) -> None:
    group = tmp_path / "autogroup"
    group.write_text("")
    seen = _refusing(monkeypatch, refusals, code)
    _lower_autogroup(10, str(group))
    assert len(seen) == tries and group.read_text() == written


def test_no_autogroup_file_is_no_error(tmp_path: Path) -> None:
    _lower_autogroup(10, str(tmp_path / "missing"))
