"""The heartbeat thread that grading and profiling jobs share: it beats while the block runs,
goes on past a beat that fails, and stops with the block."""

from __future__ import annotations

import threading
import time

from app.jobs.heartbeat import Beats


def test_it_beats_past_a_failed_beat_and_stops_with_the_block() -> None:
    calls: list[float] = []
    third = threading.Event()

    def beat() -> None:
        calls.append(time.monotonic())
        if len(calls) >= 3:
            third.set()
        if len(calls) == 1:
            raise RuntimeError("the database is away")

    with Beats(beat, every_seconds=0.01, name="test-beats") as beats:
        assert third.wait(5.0), f"only {len(calls)} beats in 5 s"
    assert not beats._thread.is_alive()
    done = len(calls)
    time.sleep(0.05)
    assert len(calls) == done  # nothing beats after the block


def test_no_beat_before_the_first_interval() -> None:
    calls: list[int] = []
    with Beats(lambda: calls.append(1), every_seconds=60.0, name="test-slow-beats"):
        pass
    assert calls == []
