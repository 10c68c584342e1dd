"""The failed-login throttle: counts age out, and spraying made-up keys frees nobody."""

from __future__ import annotations

from app.core.throttle import FailureThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_waits_until_its_failures_age_out() -> None:
    clock = Clock()
    throttle = FailureThrottle(max_failures=2, window_seconds=60, clock=clock)
    throttle.failed("account:ada")
    assert throttle.retry_after("account:ada") == 0
    clock.now += 10
    throttle.failed("account:ada")
    assert throttle.retry_after("account:ada") == 50
    clock.now += 50
    assert throttle.retry_after("account:ada") == 0


def test_filling_the_table_with_made_up_keys_does_not_free_a_throttled_account() -> None:
    clock = Clock()
    throttle = FailureThrottle(max_failures=3, window_seconds=900, clock=clock, max_keys=50)
    for _ in range(3):
        throttle.failed("account:victim@uni.edu")
    assert throttle.retry_after("account:victim@uni.edu") > 0
    # The attacker fails once each on many made-up accounts, to overflow the table.
    for i in range(500):
        throttle.failed(f"account:nobody{i}@example.edu")
    assert throttle.retry_after("account:victim@uni.edu") > 0
