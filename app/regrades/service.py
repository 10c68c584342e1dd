"""Regrade requests: a student asks about one submission (or one of its cases) in a few
sentences; the staff answer from a queue per lab and accept (a regrade, or points added or
taken away with a reason) or decline. Every change is a `RegradeEvent`.

Requests are taken from the moment a submission has a verdict until the lab's window closes:
`Course.regrade_window_days` after the lab's grades are released (app.courses.release).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Closed, Conflict, Forbidden, Invalid, NotFound
from app.courses.models import Course, Lab
from app.courses.release import regrade_requests_close_at
from app.courses.service import require_staff, role_in
from app.policy.recount import recount
from app.regrades.models import RegradeEvent, RegradeRequest, RequestState
from app.submissions.credits import credited_users
from app.submissions.models import CaseResult, GradingJob, Submission
from app.submissions.service import regrade as regrade_submission
from app.submissions.service import visible_submission
from app.users.models import User

MAX_TEXT = 2000
MAX_ANSWER = 4000
MAX_POINTS = 1000.0


@dataclass(frozen=True)
class RequestRow:
    request: RegradeRequest
    lab: Lab
    student: User
    answered_by: User | None
    events: list[tuple[RegradeEvent, str]]  # the event and who made it ("" for nobody)


def _text(value: str, *, limit: int, what: str) -> str:
    text = value.strip()
    if not text:
        raise Invalid(f"Write the {what}; it cannot be empty.", field="text")
    if len(text) > limit:
        raise Invalid(
            f"The {what} is {len(text)} characters, more than the {limit} allowed; shorten it.",
            field="text",
        )
    return text


def _event(
    session: Session,
    request: RegradeRequest,
    *,
    by: User | None,
    action: str,
    text: str = "",
    points: float | None = None,
    now: datetime,
) -> None:
    session.add(
        RegradeEvent(
            request_id=request.id,
            by_id=by.id if by else None,
            action=action,
            text=text,
            points=points,
            at=now,
        )
    )


def window_closes_at(session: Session, *, lab: Lab) -> datetime | None:
    return regrade_requests_close_at(session.get_one(Course, lab.course_id), lab)


def ask(
    session: Session,
    *,
    user: User,
    submission_id: int,
    text: str,
    case: str = "",
    now: datetime,
) -> RegradeRequest:
    """A student asks for a regrade of a submission that counts for them (or of one case)."""
    submission, staff = visible_submission(session, user=user, submission_id=submission_id)
    if staff:
        raise Forbidden(
            "Staff regrade a submission directly (its page's Regrade button); requests are for "
            "students."
        )
    body = _text(text, limit=MAX_TEXT, what="request")
    lab = session.get_one(Lab, submission.lab_id)
    closes = window_closes_at(session, lab=lab)
    if closes is not None and now >= closes:
        raise Closed(
            f"Regrade requests for {lab.slug} closed at {closes:%Y-%m-%d %H:%M} UTC, "
            f"{session.get_one(Course, lab.course_id).regrade_window_days} days after its "
            "grades were released; ask the course staff directly if something is wrong."
        )
    if submission.graded_at is None:
        raise Conflict(f"Submission {submission.id} has no verdict yet; ask once it is graded.")
    case_name = case.strip()
    if case_name:
        known = session.scalar(
            select(CaseResult.id)
            .join(GradingJob, GradingJob.id == CaseResult.job_id)
            .where(GradingJob.submission_id == submission.id, CaseResult.name == case_name)
            .limit(1)
        )
        if known is None:
            raise Invalid(
                f"Submission {submission.id} has no test case {case_name!r}; pick one of its "
                "cases, or leave the case empty to ask about the whole submission."
            )
    # One open request per submission (a team's submission: one for the team). The asks take
    # turns on the submission's row (a row lock on PostgreSQL, the write lock on SQLite), so a
    # second ask sees the first's request; the partial unique index holds it regardless.
    session.execute(
        update(Submission)
        .where(Submission.id == submission.id)
        .values(status=Submission.status)
        .execution_options(synchronize_session=False)
    )
    _refuse_a_second_open_request(session, user=user, submission_id=submission.id)
    request = RegradeRequest(
        lab_id=lab.id,
        submission_id=submission.id,
        user_id=user.id,
        case_name=case_name,
        text=body,
        created_at=now,
    )
    try:
        with session.begin_nested():
            session.add(request)
    except IntegrityError:
        _refuse_a_second_open_request(session, user=user, submission_id=submission.id)
        raise Conflict(
            f"Another request about submission {submission.id} was opened at the same moment; "
            "reload the page to read it."
        ) from None
    _event(session, request, by=user, action="asked", text=body, now=now)
    session.flush()
    return request


def _refuse_a_second_open_request(session: Session, *, user: User, submission_id: int) -> None:
    open_one = session.execute(
        select(RegradeRequest.id, User.email)
        .join(User, User.id == RegradeRequest.user_id)
        .where(
            RegradeRequest.submission_id == submission_id,
            RegradeRequest.state == RequestState.open.value,
        )
    ).first()
    if open_one is None:
        return
    request_id, email = open_one
    if email == user.email:
        raise Conflict(
            f"You already have an open request (#{request_id}) about submission "
            f"{submission_id}; wait for its answer, or withdraw it and ask again."
        )
    raise Conflict(
        f"Your teammate {email} already has an open request (#{request_id}) about submission "
        f"{submission_id}, which counts for you both; a submission has one open request at a "
        "time, so wait for its answer (or ask them to add what you want to say)."
    )


def _lock(session: Session, request_id: int) -> RegradeRequest:
    # One answer at a time: a second one finds the request already answered.
    session.execute(
        update(RegradeRequest)
        .where(RegradeRequest.id == request_id)
        .values(state=RegradeRequest.state)
        .execution_options(synchronize_session=False)
    )
    request = session.scalar(
        select(RegradeRequest)
        .where(RegradeRequest.id == request_id)
        .execution_options(populate_existing=True)
    )
    if request is None:
        raise NotFound(f"There is no regrade request {request_id}.")
    return request


def _staff_request(session: Session, *, user: User, request_id: int) -> RegradeRequest:
    request = _lock(session, request_id)
    lab = session.get_one(Lab, request.lab_id)
    require_staff(session, user=user, course=session.get_one(Course, lab.course_id))
    if request.state != RequestState.open.value:
        raise Conflict(f"Request {request.id} was {request.state} already; it is closed.")
    return request


def answer(
    session: Session,
    *,
    user: User,
    request_id: int,
    decision: str,
    text: str,
    points: float | None = None,
    now: datetime,
) -> tuple[RegradeRequest, GradingJob | None]:
    """Staff: settle a request. `decision`: "regrade" (grade the submission again), "adjust"
    (add `points`, negative to take away, with the answer as the reason) or "decline". Returns
    the request and the regrade's job (sent once the caller commits)."""
    if decision not in ("regrade", "adjust", "decline"):
        raise Invalid("Choose regrade, adjust or decline.")
    reply = _text(text, limit=MAX_ANSWER, what="answer")
    request = _staff_request(session, user=user, request_id=request_id)
    submission = session.get_one(Submission, request.submission_id)
    job = None
    if decision == "regrade":
        job = regrade_submission(session, user=user, submission=submission, now=now)
    elif decision == "adjust":
        if points is None or points == 0:
            raise Invalid(
                "Give the points to add (or, negative, to take away); not 0.", field="points"
            )
        if abs(points) > MAX_POINTS:
            raise Invalid(
                f"An adjustment is at most {MAX_POINTS:g} points either way.", field="points"
            )
        # Added by the database to what it holds now, never to a copy read earlier.
        session.execute(
            update(Submission)
            .where(Submission.id == submission.id)
            .values(points_adjustment=Submission.points_adjustment + points)
            .execution_options(synchronize_session=False)
        )
        session.expire(submission, ["points_adjustment"])
    request.state = (
        RequestState.declined.value if decision == "decline" else RequestState.accepted.value
    )
    request.outcome = "" if decision == "decline" else decision
    request.answer = reply
    request.points = points if decision == "adjust" else None
    request.answered_by_id = user.id
    request.answered_at = now
    _event(
        session,
        request,
        by=user,
        action="declined" if decision == "decline" else f"accepted: {decision}",
        text=reply,
        points=request.points,
        now=now,
    )
    session.flush()
    if decision == "adjust":
        # The adjusted score can change what counts, and so the late days it spends.
        lab = session.get_one(Lab, submission.lab_id)
        recount(
            session, lab=lab, users=credited_users(session, submission_id=submission.id), now=now
        )
    return request, job


def withdraw(session: Session, *, user: User, request_id: int, now: datetime) -> RegradeRequest:
    request = _lock(session, request_id)
    if request.user_id != user.id:
        raise NotFound(f"There is no regrade request {request_id} of yours.")
    if request.state != RequestState.open.value:
        raise Conflict(f"Request {request.id} was {request.state} already; it is closed.")
    request.state = RequestState.withdrawn.value
    _event(session, request, by=user, action="withdrawn", now=now)
    session.flush()
    return request


def _rows(session: Session, requests: list[RegradeRequest]) -> list[RequestRow]:
    if not requests:
        return []
    ids = [r.id for r in requests]
    people = {
        u.id: u
        for u in session.scalars(
            select(User).where(
                User.id.in_(
                    {r.user_id for r in requests}
                    | {r.answered_by_id for r in requests if r.answered_by_id}
                )
            )
        )
    }
    labs = {
        lab.id: lab
        for lab in session.scalars(select(Lab).where(Lab.id.in_({r.lab_id for r in requests})))
    }
    events: dict[int, list[tuple[RegradeEvent, str]]] = {i: [] for i in ids}
    for event, email in session.execute(
        select(RegradeEvent, User.email)
        .outerjoin(User, User.id == RegradeEvent.by_id)
        .where(RegradeEvent.request_id.in_(ids))
        .order_by(RegradeEvent.id)
    ):
        events[event.request_id].append((event, email or ""))
    return [
        RequestRow(
            request=r,
            lab=labs[r.lab_id],
            student=people[r.user_id],
            answered_by=people.get(r.answered_by_id) if r.answered_by_id else None,
            events=events[r.id],
        )
        for r in requests
    ]


def queue(
    session: Session, *, user: User, course: Course, lab: Lab, state: str | None = "open"
) -> list[RequestRow]:
    """Staff: the lab's requests (open ones by default), oldest first."""
    require_staff(session, user=user, course=course)
    query = select(RegradeRequest).where(RegradeRequest.lab_id == lab.id)
    if state:
        if state not in {s.value for s in RequestState}:
            raise Invalid("Filter by open, accepted, declined or withdrawn (or nothing for all).")
        query = query.where(RegradeRequest.state == state)
    return _rows(session, list(session.scalars(query.order_by(RegradeRequest.id))))


def mine(session: Session, *, user: User, lab: Lab) -> list[RequestRow]:
    """A student's requests about a lab, newest first."""
    requests = session.scalars(
        select(RegradeRequest)
        .where(RegradeRequest.lab_id == lab.id, RegradeRequest.user_id == user.id)
        .order_by(RegradeRequest.id.desc())
    )
    return _rows(session, list(requests))


def get_request(session: Session, *, user: User, request_id: int) -> RequestRow:
    """One request, for its student or the course's staff."""
    request = session.get(RegradeRequest, request_id)
    if request is not None:
        lab = session.get_one(Lab, request.lab_id)
        if request.user_id == user.id:
            return _rows(session, [request])[0]
        course = session.get_one(Course, lab.course_id)

        role = role_in(session, user=user, course=course)
        if role is not None and role.is_staff:
            return _rows(session, [request])[0]
    raise NotFound(f"There is no regrade request {request_id} that you may see.")


def open_counts(session: Session, *, lab_ids: list[int]) -> dict[int, int]:
    return as_dict(
        session.execute(
            select(RegradeRequest.lab_id, func.count())
            .where(
                RegradeRequest.lab_id.in_(lab_ids or [-1]),
                RegradeRequest.state == RequestState.open.value,
            )
            .group_by(RegradeRequest.lab_id)
        )
    )
