"""Seconds between the steps of a child's work, for the worker's log."""

from __future__ import annotations

import time


class Marks:
    """`mark(name)` records the seconds since the previous mark (or since it was made) under
    `name`: the sanitizer's program marks loading, waiting for the GPU's lock and holding it
    (graders.sanitizer.target); the run child what it did before its first case
    (graders.run.child)."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._last, 3)
        self._last = now

    def line(self) -> str:
        return ", ".join(f"{name.removesuffix('_s')} {s:.3f} s" for name, s in self.seconds.items())
