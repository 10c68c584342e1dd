"""A thread that keeps a held job's heartbeat fresh while the worker compiles and runs it."""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from sqlalchemy import update

from app.core.database import session_scope, utcnow
from app.grading.models import GradingJob, JobState

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(self, *, job_id: int, worker_id: str, every_seconds: float) -> None:
        self.job_id = job_id
        self.worker_id = worker_id
        self.every_seconds = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def beat(self) -> None:
        with session_scope() as session:
            session.execute(
                update(GradingJob)
                .where(
                    GradingJob.id == self.job_id,
                    GradingJob.worker_id == self.worker_id,
                    GradingJob.state == JobState.started.value,
                )
                .values(heartbeat_at=utcnow())
            )

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            try:
                self.beat()
            except Exception:  # a missed beat is tolerable; a dead thread is not
                log.exception("heartbeat for job %s failed", self.job_id)

    def __enter__(self) -> Heartbeat:
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
