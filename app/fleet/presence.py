"""A worker's entry in the registry: written at start, beaten while it lives, closed at exit."""

from __future__ import annotations

import logging
import os
import socket
import threading

from app import __version__
from app.core.settings import get_settings
from app.fleet import service

log = logging.getLogger(__name__)


class Presence(threading.Thread):
    """Beats the worker's registry row every heartbeat_seconds until stopped."""

    def __init__(self, register: dict[str, object]) -> None:
        super().__init__(name="kernelgrader-presence", daemon=True)
        self.register = register
        self.stopped = threading.Event()

    def close(self) -> None:
        self.stopped.set()
        # A beat in flight would clear the stop mark written below.
        self.join(timeout=30)
        name = str(self.register["name"])
        try:
            service.mark_stopped(name)
        except Exception:
            log.exception("could not mark worker %s stopped; it will read as silent", name)

    def run(self) -> None:
        every = get_settings().heartbeat_seconds
        while not self.stopped.wait(every):
            try:
                if not service.beat(str(self.register["name"])):
                    service.register_worker(**self.register)  # type: ignore[arg-type]
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
    }
    service.register_worker(**register)  # type: ignore[arg-type]
    presence = Presence(register)
    presence.start()
    return presence
