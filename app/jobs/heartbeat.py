"""Threads that keep a held job's heartbeat fresh while the worker compiles, runs or profiles it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

log = logging.getLogger(__name__)


class Beats:
    """Calls `beat` every `every_seconds` on a thread of its own while the with block runs; a
    beat that fails is logged and the next one tried (a missed beat is tolerable, a dead
    thread is not). Grading jobs and profiling jobs keep their heartbeats fresh with it."""

    def __init__(self, beat: Callable[[], object], *, every_seconds: float, name: str) -> None:
        self.every_seconds = every_seconds
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            try:
                self._beat()
            except Exception:
                log.exception("%s: a beat failed", self._thread.name)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_seconds + 5)
