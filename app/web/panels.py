"""Parts of a page that other features fill, each from its own rooms.

A submission's page is the submissions feature's, but what it shows beside the verdicts belongs
elsewhere: its timings (performance), its profile (profiling), its regrade requests (regrades).
The page names its parts (a `Panels`), each feature adds its part where its own pages are
(`add`, run when `app.main` mounts them), and the page asks every part for what it adds to the
template's context. So the page imports none of them, and each part stays with the code it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

Part = TypeVar("Part", bound=Callable[..., Mapping[str, object]])


class Panels(Generic[Part]):
    """The parts of one page, in the order they were added."""

    def __init__(self, page: str) -> None:
        self.page = page
        self._parts: list[Part] = []

    def add(self, part: Part) -> Part:
        """Add a part (a decorator); adding the same function twice keeps one."""
        if part not in self._parts:
            self._parts.append(part)
        return part

    def context(self, **values: object) -> dict[str, object]:
        """What every part adds to the page's context, given the page's own values."""
        out: dict[str, object] = {}
        for part in self._parts:
            out.update(part(**values))
        return out
