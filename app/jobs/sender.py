"""Sending a unit of work's jobs to the broker from a thread of their own, in commit order.

A service that queues a job (an upload, a regrade, a similarity report) stamps the job as sent
and hands it over with `send_after_commit`; once the unit of work (a request, a worker's step)
commits, the job goes to this process's sender, and the request answers: it never waits on
the broker, and no router sends. Waiting on it cost every upload behind a slow broker: each
attempt against a Redis that is restarting takes about 0.6 s (kombu's reconnects), and the
requests that waited held the web process's request threads, so a restart of a second cost
uploads many.

One thread sends what it was handed, oldest first (app.jobs.send.send_in_order). From the
first send the broker refuses, it takes back the stamps of that job and of the jobs behind it,
in one write, without trying them; the database then says "not sent", and the workers' sweep
sends them in upload order once the broker answers (RESEND_AFTER_SECONDS after the upload). A
job still held here when the process ends keeps its stamp; the sweep finds it lost, as it finds
a job whose message the broker lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from sqlalchemy.orm import Session

from app.core.database import after_commit
from app.jobs.send import Send, send_in_order

log = logging.getLogger(__name__)


class JobSender:
    """A queue of committed jobs and the one thread, started at the first, that sends them."""

    def __init__(self) -> None:
        self._pending: deque[Send] = deque()
        self._sending = False
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def post(self, send: Send) -> None:
        """Hand over a committed job; it is sent after every job handed over before it."""
        with self._ready:
            self._pending.append(send)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="kernelgrader-job-sender", daemon=True
                )
                self._thread.start()
            self._ready.notify_all()

    def wait_sent(self, timeout: float) -> bool:
        """Wait until every job handed over was sent or taken back; False at the timeout."""
        deadline = time.monotonic() + timeout
        with self._ready:
            while self._pending or self._sending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ready.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                batch = list(self._pending)
                self._pending.clear()
                self._sending = True
            try:
                send_in_order(batch)
            except Exception:
                # send_in_order logs and takes back what the broker refused; anything else
                # (a bug) must not end the thread that every later upload relies on.
                log.exception("sending %d jobs failed; the sweeper sends them", len(batch))
            finally:
                with self._ready:
                    self._sending = False
                    self._ready.notify_all()


job_sender = JobSender()


def send_after_commit(session: Session, send: Send) -> None:
    """Send a job that this unit of work stamped, once it commits, without waiting for it."""
    after_commit(session, lambda: job_sender.post(send))
