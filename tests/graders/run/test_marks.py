"""Marks: seconds between a child's steps, for the worker's log."""

from __future__ import annotations

import pytest

from graders.run import marks


def test_each_mark_is_the_time_since_the_one_before(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 10.25, 10.25, 11.0])
    monkeypatch.setattr(marks.time, "monotonic", lambda: next(clock))
    m = marks.Marks()  # 10.0
    m.mark("load_s")  # 10.25
    m.mark("wait_s")  # 10.25: no time at all
    m.mark("held_s")  # 11.0
    assert m.seconds == {"load_s": 0.25, "wait_s": 0.0, "held_s": 0.75}
    assert m.line() == "load 0.250 s, wait 0.000 s, held 0.750 s"
