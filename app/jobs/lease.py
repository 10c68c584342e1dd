"""How a background job is held: one protocol for gradings, profiles and similarity reports.

A job is a row (its table's `state`, `attempt`, `started_at` and `sent_at`). It is sent to the
broker with a stamp (`sent_at`, and on tables that keep it the queue it belongs on); the stamp
is taken back if the broker refuses the message, and any stamp is a conditional write, so of
several workers sweeping at once only one sends a given job. A worker claims a queued job, or
one whose holder went silent (a conditional write: one claim wins); while it works it holds the
job with conditional writes (`hold`: a takeover either committed before, and the worker finds
it lost, or waits for its commit) and beats (`heartbeat`); when its own side fails, the job goes
back to the queue until its attempts are spent. The sweep takes back jobs whose holder went
silent (`take_back_stale`).

A table with `worker_id` and `heartbeat_at` (gradings, profiles) knows its holder and its
beats; one without (similarity reports, computed in one go) is held from its start, and is
stale once it started too long ago.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.jobs.heartbeat import Beats


@dataclass(frozen=True)
class Lease:
    """The states and columns by which one table's jobs are held."""

    model: Any  # the mapped class: id, state, attempt, started_at, sent_at
    queued: str = "queued"
    started: str = "started"
    failed: str = "failed"
    # worker_id and heartbeat_at: the holder is named and beats; else started_at ages.
    holder: bool = True
    # sent_queue: a stamp also says which queue the message went to.
    sent_queue: bool = True

    def _col(self, name: str) -> Any:
        return getattr(self.model, name)

    @property
    def _since(self) -> Any:
        """The column a silent holder is judged by."""
        return self._col("heartbeat_at" if self.holder else "started_at")

    def claim(
        self,
        session: Session,
        job_id: int,
        *,
        now: datetime,
        me: str = "",
        stale_before: datetime | None = None,
        max_attempts: int | None = None,
        retake_own: bool = False,
        where: Iterable[ColumnElement[bool]] = (),
        values: Mapping[str, Any] | None = None,
    ) -> bool:
        """Take the job if it is queued; with `stale_before`, also if its holder went silent
        before then (within `max_attempts`); with `retake_own`, also if this worker (`me`)
        holds it already (its own job, tried again after the database was away: the caller
        knows no thread of its own still runs it). One conditional write: one claim wins."""
        state, attempt = self._col("state"), self._col("attempt")
        takeable: list[ColumnElement[bool]] = [state == self.queued]
        if stale_before is not None:
            takeable.append(
                (state == self.started)
                & (self._since < stale_before)
                & (attempt < (max_attempts or 0))
            )
        if retake_own and self.holder:
            takeable.append(
                (state == self.started)
                & (self._col("worker_id") == me)
                & (attempt < (max_attempts or 0))
            )
        taken: dict[str, Any] = {"state": self.started, "attempt": attempt + 1, "started_at": now}
        if self.holder:
            taken.update(worker_id=me, heartbeat_at=now, error="")
        claimed = session.execute(
            update(self.model)
            .where(self._col("id") == job_id, *where, or_(*takeable))
            .values(**taken, **(values or {}))
        )
        return bool(claimed.rowcount == 1)  # type: ignore[attr-defined]

    def hold(self, session: Session, job_id: int, me: str) -> bool:
        """True if this worker still holds the job, and keep it held until the session commits.

        A conditional write, not a read: between reading "mine" and committing, the sweep or a
        second delivery could hand the job to another worker, and this one would then record
        over it. The UPDATE takes the row's write lock (PostgreSQL) or the database's (SQLite),
        so a takeover either committed before it (no row matches) or waits until this commit.
        """
        held = session.execute(
            update(self.model)
            .where(
                self._col("id") == job_id,
                self._col("worker_id") == me,
                self._col("state") == self.started,
            )
            .values(heartbeat_at=utcnow())
        )
        return bool(held.rowcount == 1)  # type: ignore[attr-defined]

    def beat(self, job_id: int, me: str) -> bool:
        """One heartbeat of a held job, in a transaction of its own."""
        with session_scope() as session:
            return self.hold(session, job_id, me)

    def heartbeat(self, job_id: int, me: str, *, every_seconds: float, name: str) -> Beats:
        """Beats that keep the job's heartbeat fresh while a with block works on it."""
        return Beats(lambda: self.beat(job_id, me), every_seconds=every_seconds, name=name)

    def stamp(
        self,
        session: Session,
        job_id: int,
        *,
        old: datetime | None,
        new: datetime | None,
        queue: str | None = None,
    ) -> bool:
        """Stamp a queued job as sent at `new` (None: not sent) on `queue`, if its stamp is
        still `old`: of several workers stamping at once, one does."""
        sent_at = self._col("sent_at")
        values: dict[str, Any] = {"sent_at": new}
        if queue is not None and self.sent_queue:
            values["sent_queue"] = queue
        moved = session.execute(
            update(self.model)
            .where(
                self._col("id") == job_id,
                self._col("state") == self.queued,
                sent_at.is_(None) if old is None else sent_at == old,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return bool(moved.rowcount == 1)  # type: ignore[attr-defined]

    def take_back_stale(
        self,
        session: Session,
        *,
        stale_before: datetime,
        max_attempts: int,
        failed: Callable[[Any], Mapping[str, Any]],
        queued: Mapping[str, Any],
    ) -> list[int]:
        """Jobs whose holder went silent before `stale_before`: queued again (with `queued`'s
        values, unsent) while attempts remain, else failed (with `failed(job)`'s). Each a
        conditional write, so a holder whose beat lands first keeps its job. Returns the ids
        taken back."""
        since = self._since
        taken = []
        for job in session.scalars(
            select(self.model).where(self._col("state") == self.started, since < stale_before)
        ).all():
            if job.attempt >= max_attempts:
                values = {"state": self.failed, **failed(job)}
            else:
                values = {"state": self.queued, "sent_at": None, **queued}
                if self.holder:
                    values["worker_id"] = None
            moved = session.execute(
                update(self.model)
                .where(
                    self._col("id") == job.id,
                    self._col("state") == self.started,
                    since == getattr(job, since.key),
                )
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if moved.rowcount == 1:  # type: ignore[attr-defined]
                taken.append(job.id)
        return taken
