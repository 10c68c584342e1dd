"""The sandbox's tests run twice where it matters: children started fresh (an interpreter each)
and children forked from the worker's zygotes (graders.sandbox.zygotes). Every property a fresh
child has must hold for a forked one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from graders.sandbox import zygotes


@pytest.fixture(scope="module", params=["fresh", "forked"])
def child_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which kind of child this module's tests get; zygotes off again afterwards."""
    if request.param == "forked":
        zygotes.enable()
    try:
        yield str(request.param)
    finally:
        zygotes.disable()
