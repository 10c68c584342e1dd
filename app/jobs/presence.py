"""A worker's entry in the registry: written at start, beaten while it lives, closed at exit.

Each beat also says when the worker last held a task (how long it has been idle, which the
fleet's policy reads) and brings back whether the fleet asked it to drain.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from celery.signals import task_postrun, task_prerun

from app import __version__
from app.core.database import utcnow
from app.core.settings import get_settings
from app.jobs import workers

log = logging.getLogger(__name__)

# Set by the job script of a worker the fleet borrowed: "slurm:<job id>" (app.fleet.slurm).
FLEET_JOB_VARIABLE = "KERNELGRADER_FLEET_JOB"


class Activity:
    """When this worker last held a task: now while one runs, else when the latest ended.

    Fed by Celery's task signals, so it counts every kind of task (gradings, profiles,
    similarity reports), however short, not only what a beat happens to see.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._last: datetime | None = None

    def connect(self) -> None:
        task_prerun.connect(self.started, weak=False)
        task_postrun.connect(self.finished, weak=False)

    def disconnect(self) -> None:
        task_prerun.disconnect(self.started)
        task_postrun.disconnect(self.finished)

    def started(self, **_: Any) -> None:
        with self._lock:
            self._running += 1
            self._last = utcnow()

    def finished(self, **_: Any) -> None:
        with self._lock:
            self._running = max(0, self._running - 1)
            self._last = utcnow()

    def busy_at(self) -> datetime | None:
        with self._lock:
            return utcnow() if self._running else self._last


class Presence(threading.Thread):
    """Beats the worker's registry row every heartbeat_seconds until stopped."""

    def __init__(
        self,
        register: dict[str, object],
        *,
        activity: Activity | None = None,
        on_drain: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="kernelgrader-presence", daemon=True)
        self.register = register
        self.activity = activity
        self.on_drain = on_drain
        self.draining = False
        self.stopped = threading.Event()

    def close(self) -> None:
        self.stopped.set()
        # A beat in flight would clear the stop mark written below.
        self.join(timeout=30)
        name = str(self.register["name"])
        try:
            workers.mark_stopped(name)
        except Exception:
            log.exception("could not mark worker %s stopped; it will read as silent", name)

    def run(self) -> None:
        every = get_settings().heartbeat_seconds
        while not self.stopped.wait(every):
            try:
                busy_at = self.activity.busy_at() if self.activity is not None else None
                answer = workers.beat(str(self.register["name"]), busy_at=busy_at)
                if answer is None:
                    workers.register_worker(**self.register)  # type: ignore[arg-type]
                elif answer.drain and not self.draining and self.on_drain is not None:
                    self.draining = True
                    log.info(
                        "the fleet asked this worker to drain: it finishes the task in hand, "
                        "takes no new one, and exits"
                    )
                    self.on_drain()
            except Exception:  # a missed beat is tolerable; a dead thread is not
                log.exception("the worker's registry heartbeat failed; trying again in %s s", every)


def announce(
    *,
    name: str,
    gpu_model: str,
    arch: str,
    can_run: bool,
    note: str,
    queues: list[str],
    activity: Activity | None = None,
    on_drain: Callable[[], None] | None = None,
) -> Presence:
    """Register this worker (it can compile) and start beating; `close()` marks it stopped."""
    register: dict[str, object] = {
        "name": name,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "gpu_model": gpu_model,
        "arch": arch,
        "can_compile": True,
        "can_run": can_run,
        "note": note,
        "queues": queues,
        "version": __version__,
        "fleet_job": os.environ.get(FLEET_JOB_VARIABLE, "")[:100],
    }
    workers.register_worker(**register)  # type: ignore[arg-type]
    presence = Presence(register, activity=activity, on_drain=on_drain)
    presence.start()
    return presence
