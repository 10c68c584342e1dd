"""Throttling failed logins: after too many failures for one account or one address, wait.

Kept in the web process's memory: a restart forgets it, and with several web replicas each
counts on its own (so the real limit is the setting times the number of replicas). That still
turns password guessing from thousands of tries a minute into a handful, without a table.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable


class FailureThrottle:
    """Sliding-window failure counts per key; a key over the limit is refused until it ages."""

    def __init__(
        self,
        *,
        max_failures: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self._clock = clock
        self._max_keys = max_keys
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float] | None:
        stamps = self._failures.get(key)
        if stamps is None:
            return None
        while stamps and stamps[0] <= now - self.window_seconds:
            stamps.popleft()
        if not stamps:
            del self._failures[key]
            return None
        return stamps

    def retry_after(self, *keys: str) -> int:
        """Seconds to wait before any of these keys may try again; 0 when they may now."""
        if self.max_failures <= 0:
            return 0
        now = self._clock()
        wait = 0.0
        with self._lock:
            for key in keys:
                stamps = self._recent(key, now)
                if stamps is not None and len(stamps) >= self.max_failures:
                    # Free again once enough failures have aged out of the window.
                    oldest_counted = stamps[len(stamps) - self.max_failures]
                    wait = max(wait, oldest_counted + self.window_seconds - now)
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, *keys: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) >= self._max_keys:
                self._make_room(now)
            for key in keys:
                self._failures.setdefault(key, deque()).append(now)

    def _make_room(self, now: float) -> None:
        # Someone is spraying keys. Forget what has aged out, then keys still under the limit;
        # never a key that is waiting, or spraying made-up accounts would free the one under
        # attack. Only if every key is waiting is the lot forgotten, to stay bounded.
        for key in list(self._failures):
            self._recent(key, now)
        if len(self._failures) >= self._max_keys:
            for key in [k for k, v in self._failures.items() if len(v) < self.max_failures]:
                del self._failures[key]
        if len(self._failures) >= self._max_keys:
            self._failures.clear()

    def succeeded(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
