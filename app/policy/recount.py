"""Settling a whole course's late days again after its policy changed (the budget, the cap), a
short batch of students at a time.

Settling 300 students across 16 labs in the policy change's own transaction held SQLite's write
lock for seconds, and uploads meanwhile were refused ("database is locked"). Now the change only
marks the recount as owed (app.latedays.service.set_budget: `Course.late_days_recount_at`, and
`late_days_recounted_to`, the last student done, by id) in its own quick transaction; then
`recount_owed` settles the students in batches of about `BATCH_SETTLES` settles (students times
labs), each batch its own transaction, so the lock is free between batches and other writes go
in. The request that made the change runs batches after its commit for up to REQUEST_SECONDS,
then a thread of its process takes over; if that process stops half-way, the workers' sweep
finishes what is left. Until then the API and the late-days page say how far it got.

A batch first takes the course's row (a row lock on PostgreSQL, the write lock on SQLite), so
two recounters (the request and a sweep) take batches in turn and never settle one batch
twice; a new policy change meanwhile starts the recount over from the first student.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.service import labs_of
from app.latedays.models import LateDayCharge, LateDayReservation
from app.policy.settle import settle
from app.submissions.credits import credited_pairs
from app.submissions.models import Submission

log = logging.getLogger(__name__)

# At most about this many settles (students times labs) per transaction: a few hundredths of a
# second each on an idle machine (bench/latedays_recount.py).
BATCH_SETTLES = 32
# The longest pause between batches on SQLite, so that waiting writers (uploads) go first.
PAUSE_SECONDS = 0.1
# How long the request that changed the policy recounts before a thread takes over.
REQUEST_SECONDS = 2.0
# A recount owed for longer than this is taken up by the sweep (its request died half-way).
SWEEP_AFTER = timedelta(seconds=30)


def recount(
    session: Session, *, lab: Lab, users: Iterable[int] | None = None, now: datetime
) -> None:
    """What counts may have moved for these students of the lab (every student, where None): a
    verdict, a regrade, a due date, an extension, a policy, a cap. Their late days follow it
    (app.policy.settle), in id order, so two recounts of a team never wait on each other
    crosswise. The one way in for everything that moves what counts; the caller commits."""
    course = session.get_one(Course, lab.course_id)
    if course.late_days <= 0 and not _any_charge(session, lab=lab):
        return
    ids = (
        sorted(users)
        if users is not None
        else sorted(
            session.scalars(
                select(Enrollment.user_id).where(
                    Enrollment.course_id == course.id, Enrollment.role == Role.student.value
                )
            )
        )
    )
    for user_id in ids:
        settle(session, course=course, lab=lab, user_id=user_id, now=now)


def _any_charge(session: Session, *, lab: Lab) -> bool:
    """Whether anything of the lab's was ever charged, or is held by an upload."""
    found = session.scalar(select(LateDayCharge.id).where(LateDayCharge.lab_id == lab.id).limit(1))
    if found is None:
        found = session.scalar(
            select(LateDayReservation.id).where(LateDayReservation.lab_id == lab.id).limit(1)
        )
    return found is not None


@dataclass(frozen=True)
class RecountState:
    """What the late-days page says while a recount is owed."""

    since: datetime
    done: int  # students recounted
    students: int


def recount_batch(*, course_id: int, now: datetime, settles: int | None = None) -> bool:
    """Settle the next batch of the course's students in one transaction of its own; True
    while more remain."""
    with session_scope() as session:
        session.execute(
            update(Course)
            .where(Course.id == course_id)
            .values(late_days_recounted_to=Course.late_days_recounted_to)
            .execution_options(synchronize_session=False)
        )
        course = session.scalar(
            select(Course).where(Course.id == course_id).execution_options(populate_existing=True)
        )
        if course is None or course.late_days_recount_at is None:
            return False
        labs = labs_of(session, course=course)
        size = max(1, (settles or BATCH_SETTLES) // max(1, len(labs)))
        students = list(
            session.scalars(
                select(Enrollment.user_id)
                .where(
                    Enrollment.course_id == course.id,
                    Enrollment.role == Role.student.value,
                    Enrollment.user_id > course.late_days_recounted_to,
                )
                .order_by(Enrollment.user_id)
                .limit(size)
            )
        )
        work = _to_settle(session, labs=labs, students=students)
        for user_id in students:
            for lab in labs:
                if (lab.id, user_id) in work:
                    settle(session, course=course, lab=lab, user_id=user_id, now=now)
        if len(students) < size:
            course.late_days_recount_at = None
            course.late_days_recounted_to = 0
            return False
        course.late_days_recounted_to = students[-1]
        return True


def _to_settle(session: Session, *, labs: list[Lab], students: list[int]) -> set[tuple[int, int]]:
    """(lab id, student id) where a settle may change something: a charge or a hold to move, or
    a submission made after the lab's due date (an extension only moves a due date later, so
    nothing earlier is late for anyone) that counts for the student."""
    lab_ids = [lab.id for lab in labs] or [-1]
    pairs: set[tuple[int, int]] = set()
    for table in (LateDayCharge, LateDayReservation):
        pairs.update(
            (lab_id, user_id)
            for lab_id, user_id in session.execute(
                select(table.lab_id, table.user_id).where(
                    table.lab_id.in_(lab_ids), table.user_id.in_(students or [-1])
                )
            )
        )
    due = {lab.id: lab.due_at for lab in labs if lab.due_at is not None}
    credited = credited_pairs(list(due)).subquery()
    for lab_id, user_id, created_at in session.execute(
        select(Submission.lab_id, credited.c.user_id, Submission.created_at)
        .join(credited, credited.c.submission_id == Submission.id)
        .where(credited.c.user_id.in_(students or [-1]))
    ):
        if created_at > due[lab_id]:
            pairs.add((lab_id, user_id))
    return pairs


def recount_owed(
    course_id: int, *, now: datetime | None = None, seconds: float | None = None
) -> bool:
    """Run the course's owed recount, batch after batch, to its end (True) or until `seconds`
    have passed (False: some is left).

    On SQLite it pauses between batches (as long as the batch took, 0.02 to 0.1 s): a writer
    that found the lock taken sleeps up to 0.1 s before it asks again (SQLite's busy handler),
    and a batch begun at once would take the lock before it ever woke."""
    sqlite = get_settings().database_url.startswith("sqlite")
    began = time.monotonic()
    while True:
        started = time.monotonic()
        if not recount_batch(course_id=course_id, now=now or utcnow()):
            return True
        if seconds is not None and time.monotonic() - began >= seconds:
            return False
        if sqlite:
            # As long as the batch held the lock, within bounds: waiting writers go first.
            time.sleep(min(PAUSE_SECONDS, max(0.02, time.monotonic() - started)))


def recount_after_change(course_id: int) -> None:
    """In the request that changed the policy, once it committed: recount for up to
    REQUEST_SECONDS, then leave the rest to a thread of this process (the answer and the page
    say how far it got; should the process stop, the workers' sweep finishes it)."""
    if recount_owed(course_id, seconds=REQUEST_SECONDS):
        return
    threading.Thread(
        target=_recount_in_background,
        args=(course_id,),
        name=f"kernelgrader-late-day-recount-{course_id}",
        daemon=True,
    ).start()


def _recount_in_background(course_id: int) -> None:
    try:
        recount_owed(course_id)
    except Exception:
        log.exception("recounting the late days of course %s stopped; the sweep goes on", course_id)


def recount_state(session: Session, *, course: Course) -> RecountState | None:
    """None when no recount is owed; else since when, and how far it got."""
    if course.late_days_recount_at is None:
        return None
    students = (
        select(func.count())
        .select_from(Enrollment)
        .where(Enrollment.course_id == course.id, Enrollment.role == Role.student.value)
    )
    total = session.scalar(students) or 0
    done = session.scalar(students.where(Enrollment.user_id <= course.late_days_recounted_to))
    return RecountState(since=course.late_days_recount_at, done=done or 0, students=total)


def sweep_recounts(*, now: datetime | None = None) -> list[int]:
    """The workers' sweep: finish the recounts that their requests left half-way; the ids of
    the courses recounted."""
    now = now or utcnow()
    with session_scope() as session:
        owing = list(
            session.scalars(
                select(Course.id).where(
                    Course.late_days_recount_at.is_not(None),
                    Course.late_days_recount_at < now - SWEEP_AFTER,
                )
            )
        )
    for course_id in owing:
        started = time.monotonic()
        recount_owed(course_id)
        log.info(
            "recounted the late days of course %s (%.1f s)", course_id, time.monotonic() - started
        )
    return owing
