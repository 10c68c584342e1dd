"""When the timed section's own warm-up may stop at its drawn rounds: the SM clock is still
where the warm-up under the shared lock left it (graders.run.timed.at_speed_since)."""

from __future__ import annotations

from graders.run.timed import AT_SPEED_SHARE, at_speed_since


def test_a_clock_within_the_share_of_the_warmed_one_is_at_speed() -> None:
    assert at_speed_since(1980, lambda: 1980)
    assert at_speed_since(1980, lambda: 2100)  # boosted further: still at speed
    edge = AT_SPEED_SHARE * 1000  # 970 MHz of 1000: exactly the share
    assert at_speed_since(1000, lambda: edge)
    assert not at_speed_since(1000, lambda: edge - 1)


def test_a_clock_that_fell_while_waiting_for_the_lock_is_not() -> None:
    assert not at_speed_since(1980, lambda: 345)  # an idle H100's SM clock


def test_without_a_reading_the_busy_time_decides() -> None:
    calls: list[int] = []

    def read() -> int | None:
        calls.append(1)
        return None

    assert not at_speed_since(1980, read)
    assert not at_speed_since(None, lambda: 1980)  # no NVML when the arms were warmed
    assert not at_speed_since(0, lambda: 1980)
    assert len(calls) == 1
