"""Intake checks, status changes and who may see which submission."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, defer, load_only

from app.core.database import utcnow
from app.core.errors import Closed, Conflict, Forbidden, Invalid, NotFound, TooLarge
from app.core.limits import size_words
from app.core.settings import get_settings
from app.core.timefmt import when_text
from app.courses.deadlines import Availability, deadline_for, lab_state
from app.courses.models import Course, Enrollment, Lab, LatePolicy, Role
from app.courses.service import require_member
from app.jobs.celery_app import GRADE_TASK, QUEUE
from app.jobs.send import Send
from app.jobs.sender import send_after_commit
from app.jobs.workers import queued_message
from app.latedays.holds import held_per_lab
from app.latedays.intake import reserve_for_upload
from app.latedays.service import available_for, take_turn
from app.submissions.credits import credit_submission, credited_pairs, credited_users, is_credited
from app.submissions.models import (
    GRADING,
    GradingJob,
    JobState,
    Priority,
    Status,
    Submission,
    SubmissionEvent,
)
from app.submissions.quota import enforce_submission_quota
from app.teams.models import Team
from app.teams.service import current_members, team_of
from app.users.models import User


class HasStatus(Protocol):
    """Anything with a submission's status (a row read for counting, say)."""

    @property
    def status(self) -> str: ...


def set_status(
    session: Session,
    submission: Submission,
    status: Status,
    message: str = "",
    *,
    staff_note: str = "",
) -> None:
    """Change a submission's status and record the change with its time.

    `message` is what everyone reads, the student included: a sentence for students.
    `staff_note` is for the course's staff only: driver errors, the worker to start, where to
    look (`/admin/system`). The two are kept apart here, where they are written, so no page or
    API answer has to pick the staff's words out of the student's."""
    submission.status = status.value
    submission.status_message = message
    submission.status_staff_note = staff_note
    session.add(
        SubmissionEvent(
            submission_id=submission.id, status=status.value, message=message, staff_note=staff_note
        )
    )


def display_filename(filename: str | None) -> str:
    # Only the last path component, printable and short: it is shown, never opened.
    name = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if c.isprintable()).strip()[:100]
    return name or "submission.cu"


def compile_name(filename: str) -> str:
    # The compiler shows this name in its log; keep it a plain name that ends in .cu.
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename)[:80]
    return name if name.endswith(".cu") else "submission.cu"


def check_source(data: bytes, *, limit: int, size: int | None = None) -> str:
    """The upload as text, or a sentence why not. `data` is read one byte past the limit at
    most; `size`, where known, is the whole upload's, so a refusal names the real size."""
    if len(data) > limit:
        if size is not None and size > limit:
            told = f"The file is {size} bytes ({size_words(size)}), over the limit of {limit} bytes"
        else:
            told = f"The file is larger than the limit of {limit} bytes"
        raise TooLarge(f"{told} ({size_words(limit)}); submit only the kernel's .cu source file.")
    if not data.strip():
        raise Invalid("The file is empty; choose the .cu file that holds your kernel.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(
            f"The file is not UTF-8 text (byte {exc.start} cannot be decoded); "
            "submit the .cu source file, not a binary."
        ) from None
    if "\x00" in text:
        raise Invalid("The file contains NUL bytes, so it is not source text; submit the .cu file.")
    return text


def check_one_file(parts: int) -> None:
    """An upload is one file: a form with two `file` parts is refused, not read as its last."""
    if parts != 1:
        raise Invalid(
            f"The upload holds {parts} files (form parts named 'file'); send exactly one .cu "
            "file per submission, and each of the others as a submission of its own."
        )


def check_filename(filename: str | None) -> None:
    """One .cu file, as the form and the API say; an upload without a name (a client that
    sends none) is taken as the source it is."""
    if filename is None or not filename.strip():
        return
    name = display_filename(filename)
    if not name.lower().endswith(".cu"):
        raise Invalid(
            f"{name} is not a .cu file; submit the CUDA source file of your kernel, whose name "
            "ends in .cu (rename it if it holds CUDA source under another name)."
        )


@dataclass
class Intake:
    submission: Submission
    job: GradingJob
    submission_id: int = field(init=False)
    job_id: int = field(init=False)
    lab_id: int = field(init=False)

    def __post_init__(self) -> None:
        # Kept apart from the rows, which a rollback after a failed commit resets.
        self.submission_id = self.submission.id
        self.job_id = self.job.id
        self.lab_id = self.submission.lab_id

    def stored(self, session: Session) -> bool:
        """Whether this intake's rows are in the database (asked after a doubtful commit)."""
        found = session.scalar(select(GradingJob.id).where(GradingJob.id == self.job_id))
        return found is not None


def create_submission(
    session: Session,
    *,
    user: User,
    course: Course,
    lab: Lab,
    filename: str | None,
    data: bytes,
    now: datetime,
    size: int | None = None,
    files: int = 1,
) -> Intake:
    """Check and store a submission with a queued grading job, sent once the caller commits.
    `files`: how many file parts the upload held (one is taken, and only one)."""
    role = require_member(session, user=user, course=course)
    check_one_file(files)
    if course.archived_at is not None:
        raise Closed(
            f"{course.title} was archived on {when_text(course.archived_at)}, so it takes no "
            "more submissions; your earlier submissions are kept."
        )
    deadline = deadline_for(session, lab=lab, user_id=user.id)
    team = team_of(session, lab=lab, user_id=user.id) if lab.team_size > 1 else None
    # A late upload holds the late days it needs from now on (reserve_for_upload, below):
    # first the turn at their days of everyone it counts for, in id order (a row lock on
    # PostgreSQL, the write lock on SQLite), so that parallel late uploads read and hold the
    # budget one after the other and never all count the same last day.
    holds_days = deadline.is_late(now) and not role.is_staff and course.late_days > 0
    if holds_days:
        members = [u.id for u in current_members(session, team=team)] if team else []
        for user_id in sorted({user.id, *members}):
            take_turn(session, course_id=course.id, user_id=user_id)
    # A lab that refuses late work takes it as long as the student's late days can cover it.
    grace = 0
    if lab.late_policy == LatePolicy.refuse.value and deadline.is_late(now):
        grace = available_for(session, course=course, lab=lab, user_id=user.id)
    state = lab_state(lab, deadline, now=now, staff=role.is_staff, late_days=grace)
    if state.availability is Availability.archived:
        raise Closed(
            f"The course staff removed {lab.slug}, so it takes no more submissions; your "
            "earlier submissions are kept."
        )
    if state.availability is Availability.not_released:
        raise Closed(
            f"{lab.title} opens for submissions at {when_text(lab.release_at)}; "
            "submit again after that."
        )
    if state.availability is Availability.closed:
        yours = " (your extension)" if deadline.extended else ""
        days = ""
        if course.late_days > 0:
            days = (
                f"; your late days cover {grace} day{'s' if grace != 1 else ''} of it"
                if grace
                else "; you have no late days left for it"
            )
            held = sum(
                days
                for lab_id, days in held_per_lab(
                    session, course_id=course.id, user_id=user.id
                ).items()
                if lab_id != lab.id
            )
            if held:
                are, come = ("is", "comes") if held == 1 else ("are", "come")
                days += (
                    f" ({held} more {are} held by your late uploads to other labs still being "
                    f"graded, and {come} back if those do not count)"
                )
        raise Closed(
            f"{lab.title} was due at {when_text(deadline.due_at)}{yours} and does not "
            f"accept late submissions{days}. Ask the course staff if you need an extension."
        )
    late = state.late_now
    check_filename(filename)
    text = check_source(data, limit=get_settings().max_upload_bytes, size=size)
    # A write on the student's row before counting, so one student's requests take turns (a
    # row lock on PostgreSQL, the write lock on SQLite): a burst cannot all count the same
    # free slot. Staff are not limited and need no turn.
    if not role.is_staff:
        session.execute(
            update(User)
            .where(User.id == user.id)
            .values(email=User.email)
            .execution_options(synchronize_session=False)
        )
        # A team shares one quota: its members' uploads take turns on the team's row too.
        if team is not None:
            session.execute(
                update(Team)
                .where(Team.id == team.id)
                .values(name=Team.name)
                .execution_options(synchronize_session=False)
            )
    enforce_submission_quota(session, user=user, lab=lab, now=now)
    submission = Submission(
        user_id=user.id,
        lab_id=lab.id,
        source_text=text,
        sha256=hashlib.sha256(data).hexdigest(),
        filename=display_filename(filename),
        created_at=now,
        late=late,
        max_score=lab.max_score,
    )
    session.add(submission)
    session.flush()
    credit_submission(session, submission=submission, lab=lab)
    if holds_days:
        reserve_for_upload(
            session,
            course=course,
            lab=lab,
            submission_id=submission.id,
            students=credited_users(session, submission_id=submission.id),
            now=now,
        )
    message, note = queued_message(session, "Waiting for a worker to compile it.", now=now)
    set_status(session, submission, Status.queued, message, staff_note=note)
    job = GradingJob(submission_id=submission.id, queued_at=now)
    session.add(job)
    session.flush()
    queue_grading(session, job)
    return Intake(submission=submission, job=job)


def queue_grading(session: Session, job: GradingJob, *, queue: str = QUEUE) -> None:
    """Stamp a flushed job as sent on `queue`, in the transaction that commits it, and send it
    once that commits (app.jobs.sender); a stamp the broker refuses is taken back, and the
    workers' sweep sends the job."""
    job.sent_at = utcnow()
    job.sent_queue = queue
    message = grading_message(
        submission_id=job.submission_id, job_id=job.id, queue=queue, stamped_at=job.sent_at
    )
    send_after_commit(session, message)


def grading_message(*, submission_id: int, job_id: int, queue: str, stamped_at: datetime) -> Send:
    """A stamped job's message: the task takes the submission and the job, and the stamp and
    queue say which send it is (the worker that claims it notes them: app.grading.sweeper)."""
    return Send(
        task=GRADE_TASK,
        args=(submission_id, job_id),
        kwargs={"sent_at": stamped_at.isoformat(), "queue": queue},
        queue=queue,
        stamped_at=stamped_at,
        lease=GRADING,
        job_id=job_id,
    )


def is_staff_for(session: Session, user: User, submission: Submission) -> bool:
    role = session.scalar(
        select(Enrollment.role)
        .join(Lab, Lab.course_id == Enrollment.course_id)
        .where(Lab.id == submission.lab_id, Enrollment.user_id == user.id)
    )
    return role is not None and Role(role).is_staff


def visible_submission(
    session: Session, *, user: User, submission_id: int
) -> tuple[Submission, bool]:
    """The submission and whether the user is staff of its course, in one read.

    A student sees their own submissions and their teams' (those that count for them); staff
    see every submission of their course. The source text is left in the database until
    something shows it (`source_text_of`).
    """
    row = session.execute(
        select(Submission, Enrollment.role)
        .options(defer(Submission.source_text))
        .join(Lab, Lab.id == Submission.lab_id)
        .outerjoin(
            Enrollment,
            (Enrollment.course_id == Lab.course_id) & (Enrollment.user_id == user.id),
        )
        .where(Submission.id == submission_id)
    ).first()
    if row is not None:
        submission, role = row
        staff = role is not None and Role(role).is_staff
        if submission.user_id == user.id or staff:
            return submission, staff
        # A teammate it counts for sees it as its author does.
        if is_credited(session, submission_id=submission.id, user_id=user.id):
            return submission, False
    raise NotFound(f"There is no submission {submission_id} that you may see.")


def get_visible_submission(session: Session, *, user: User, submission_id: int) -> Submission:
    return visible_submission(session, user=user, submission_id=submission_id)[0]


def source_text_of(session: Session, *, submission: Submission) -> str:
    return session.scalars(
        select(Submission.source_text).where(Submission.id == submission.id)
    ).one()


def regrade(session: Session, *, user: User, submission: Submission, now: datetime) -> GradingJob:
    """Queue a new grading job for a submission (staff only), sent once the caller commits."""
    if not is_staff_for(session, user, submission):
        raise Forbidden("Only the course's staff may regrade a submission.")
    # A write first, so two regrades of one submission take turns (a row lock on PostgreSQL,
    # the write lock on SQLite): the second then sees the first's job and is refused.
    session.execute(
        update(Submission)
        .where(Submission.id == submission.id)
        .values(status=Submission.status)
        .execution_options(synchronize_session=False)
    )
    job = latest_job(session, submission=submission)
    if job is not None and job.state in (JobState.queued.value, JobState.started.value):
        raise Conflict(
            f"Submission {submission.id} is already waiting or being graded; "
            "wait for its result before regrading it."
        )
    # A compiled job still waiting for a GPU (or one a GPU sweep has just queued) would run
    # beside the regrade: the regrade replaces it. Conditional, so a job a worker has already
    # taken is left to finish.
    session.execute(
        update(GradingJob)
        .where(
            GradingJob.submission_id == submission.id,
            GradingJob.state.in_([JobState.waiting_gpu.value, JobState.queued.value]),
        )
        .values(state=JobState.failed.value, finished_at=now, error="replaced by a regrade")
        .execution_options(synchronize_session="fetch")
    )
    job = GradingJob(submission_id=submission.id, queued_at=now)
    session.add(job)
    message, note = queued_message(session, f"Queued again for a regrade by {user.email}.", now=now)
    set_status(session, submission, Status.queued, message, staff_note=note)
    session.flush()
    queue_grading(session, job)
    return job


def latest_job(session: Session, *, submission: Submission) -> GradingJob | None:
    return session.scalar(
        select(GradingJob)
        .where(GradingJob.submission_id == submission.id)
        .order_by(GradingJob.id.desc())
        .limit(1)
    )


def queue_position(session: Session, *, job: GradingJob | None) -> int | None:
    """For a submission's latest job: 1 when a worker takes it next; None when not waiting."""
    if job is None or job.state != JobState.queued.value:
        return None
    if job.priority != Priority.normal.value and job.sent_at is None:
        return None  # a lab regrade's job, held back until no new submission waits
    ahead = session.scalar(
        select(func.count())
        .select_from(GradingJob)
        .where(
            GradingJob.state == JobState.queued.value,
            GradingJob.queued_at < job.queued_at,
            (GradingJob.priority == Priority.normal.value) | GradingJob.sent_at.is_not(None),
        )
    )
    return int(ahead or 0) + 1


# What a list of submissions shows; a list never loads sources, logs or reports.
LISTED = (
    Submission.id,
    Submission.filename,
    Submission.user_id,
    Submission.lab_id,
    Submission.created_at,
    Submission.status,
    Submission.late,
    Submission.score,
    Submission.max_score,
    Submission.graded_at,
    Submission.review_flag,  # staff lists flag a grading to look at
)


def submissions_of(
    session: Session, *, lab_ids: list[int], user_id: int | None = None, limit: int = 500
) -> list[Submission]:
    """The newest submissions of these labs, with only the listed columns loaded."""
    query = (
        select(Submission)
        .options(load_only(*LISTED, raiseload=True))
        .where(Submission.lab_id.in_(lab_ids))
    )
    if user_id is not None:
        # Theirs, and their teams' that count for them.

        pairs = credited_pairs(lab_ids, user_id=user_id).subquery()
        query = query.where(Submission.id.in_(select(pairs.c.submission_id)))
    return list(session.scalars(query.order_by(Submission.id.desc()).limit(limit)))


def events_of(session: Session, *, submission: Submission) -> list[SubmissionEvent]:
    return list(
        session.scalars(
            select(SubmissionEvent)
            .where(SubmissionEvent.submission_id == submission.id)
            .order_by(SubmissionEvent.id)
        )
    )


# The statuses of a verdict (or of giving up); every other is on its way to one.
FINAL = frozenset(status.value for status in Status if status.is_final)


def is_pending(submission: Submission | HasStatus) -> bool:
    """Still on its way to a verdict (queued, compiling, waiting for a GPU, running)."""
    return submission.status not in FINAL


def background_waiting(session: Session, *, lab: Lab) -> int:
    """How many of the lab's regrade jobs have not been taken by a worker yet."""
    return int(
        session.scalar(
            select(func.count())
            .select_from(GradingJob)
            .join(Submission, Submission.id == GradingJob.submission_id)
            .where(
                Submission.lab_id == lab.id,
                GradingJob.state == JobState.queued.value,
                GradingJob.priority == Priority.background.value,
            )
        )
        or 0
    )
