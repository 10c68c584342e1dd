"""A worker started by `serve` or by `worker --gpus` stops when the process that started it is
gone, however that process ended (SIGKILL included).

SIGTERM first, as a supervisor stopping its workers sends: the job in hand finishes (Celery's
warm shutdown). Nobody waits for that job any more, though, and the sweeper sends it again, so
past `PARENT_GONE_GRACE_S` the worker exits at once; its sandboxed children die with it (their
lifeline, graders.sandbox.process).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

log = logging.getLogger(__name__)

# As long as `serve` waits for its local worker after SIGTERM before it kills it.
PARENT_GONE_GRACE_S = 10.0


def watch_parent(
    parent_pid: int, *, grace_s: float = PARENT_GONE_GRACE_S, poll_s: float = 1.0
) -> threading.Thread:
    """Start a daemon thread that stops this process once `parent_pid` is no longer its parent."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        log.warning(
            "the process that started this worker (pid %d) is gone; stopping, and exiting "
            "at once if still running in %.0f s",
            parent_pid,
            grace_s,
        )
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        log.warning("still running %.0f s after its parent went; exiting now", grace_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
