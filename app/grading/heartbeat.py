"""A held grading job's heartbeat (app.jobs.heartbeat.Beats beating its row)."""

from __future__ import annotations

from sqlalchemy import update

from app.core.database import session_scope, utcnow
from app.jobs.heartbeat import Beats
from app.submissions.models import GradingJob, JobState


class Heartbeat(Beats):
    """A held grading job's heartbeat, while the worker compiles and runs it."""

    def __init__(self, *, job_id: int, worker_id: str, every_seconds: float) -> None:
        self.job_id = job_id
        self.worker_id = worker_id
        super().__init__(self.beat, every_seconds=every_seconds, name=f"heartbeat-{job_id}")

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
