"""What the late-day ledger adds to other features' pages (app.web.panels): a student's lab
page says in numbers what a late upload now would do to their late days, and a submission's page
what it held, spent or gave back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.deadlines import deadline_for
from app.courses.models import Course, Lab
from app.latedays import service as latedays
from app.latedays.models import LateDayEvent, LateDayReservation
from app.submissions.models import Status, Submission
from app.submissions.pages import lab_panels, submission_panels
from app.submissions.schemas import SubmissionRead
from app.users.models import User

if TYPE_CHECKING:
    from graders.spec import LabSpec


@lab_panels.add
def late_day_outlook(
    session: Session, *, user: User, course: Course, lab: Lab, staff: bool
) -> dict[str, object]:
    """For a student's lab page after the due date: what an upload now does to their late
    days, in numbers, before they upload (app.latedays.service.outlook)."""
    if staff:
        return {"late_outlook": None}
    deadline = deadline_for(session, lab=lab, user_id=user.id)
    return {
        "late_outlook": latedays.outlook(
            session, course=course, lab=lab, user_id=user.id, deadline=deadline, now=utcnow()
        )
    }


@submission_panels.add
def late_days_of_submission(
    session: Session,
    *,
    submission: Submission,
    view: SubmissionRead,
    spec: LabSpec,
    user: User,
    staff: bool,
) -> dict[str, object]:
    """For a submission's page: what it did to late days, from the ledger (a student: their
    own; staff: everyone's it counts for), and where it stands now for a student."""
    query = select(LateDayEvent, User.email).join(User, User.id == LateDayEvent.user_id)
    query = query.where(LateDayEvent.submission_id == submission.id)
    if not staff:
        query = query.where(LateDayEvent.user_id == user.id)
    events = [(e, email) for e, email in session.execute(query.order_by(LateDayEvent.id))]
    note = "" if staff or not events else _late_day_note(session, submission=submission, user=user)
    return {"late_day_events": events, "late_day_note": note}


def _late_day_note(session: Session, *, submission: Submission, user: User) -> str:
    """Where the submission's late days stand now, for a student it counts for."""
    lab = session.get_one(Lab, submission.lab_id)
    course = session.get_one(Course, lab.course_id)
    left = latedays.balance(session, course=course, user_id=user.id).left
    held = session.scalar(
        select(LateDayReservation.days).where(
            LateDayReservation.submission_id == submission.id,
            LateDayReservation.user_id == user.id,
        )
    )
    if held:
        return (
            f"This late submission holds {latedays.days_text(held)} of your late days while it "
            "is graded: it spends them only if it compiles and counts for you, and gives them "
            f"back otherwise ({left} left meanwhile)."
        )
    charge = latedays.charge_of(session, lab=lab, user_id=user.id)
    if charge is not None and charge.submission_id == submission.id and charge.days > 0:
        return (
            f"It counts for you, and spent {latedays.days_text(charge.days)} of your late days "
            f"({left} left)."
        )
    if submission.status == Status.compile_error.value:
        return (
            "It did not compile: a compile error scores 0 and spends no late days; what it "
            f"held came back ({left} left)."
        )
    return f"It spends no late days now ({left} left)."
