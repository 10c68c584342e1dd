"""A step counter for the parsers of student text, so tests can bound their work exactly.

Every parser of a submission (the source views, the include policy, the declarations reader,
the static checks, the log cleaner) counts the characters and tokens it handles here. The
count is deterministic, unlike a clock, so a test can assert that a hostile 256 KiB file costs
at most a fixed multiple of its size (`tests/graders/compile/test_bounded_work.py`), and
`bench/parser_work.py` prints the times beside the counts.

Regular expressions count as the length of the text they are given: every pattern the parsers
run on unbounded text matches in one pass (no nested or adjacent overlapping repetition), and
the others run on slices of bounded length.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WorkMeter:
    """Steps taken since the process started (or since `reset`)."""

    def __init__(self) -> None:
        self.steps = 0

    def add(self, steps: int = 1) -> None:
        self.steps += steps

    def reset(self) -> None:
        self.steps = 0


METER = WorkMeter()


def add(steps: int = 1) -> None:
    """Count `steps` units of work (characters scanned, tokens or statements visited)."""
    METER.steps += steps


@contextmanager
def measured() -> Iterator[WorkMeter]:
    """`with measured() as work: parse(...)`; then `work.steps` is what the parse took."""
    taken = WorkMeter()
    before = METER.steps
    try:
        yield taken
    finally:
        taken.steps = METER.steps - before
