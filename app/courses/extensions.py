"""Extensions: one student's own due date for one lab."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.core.errors import Invalid, NotFound
from app.core.timefmt import when_text
from app.courses.models import Course, Extension, Lab
from app.courses.service import role_in
from app.users.models import User


@dataclass(frozen=True)
class ExtensionRow:
    extension: Extension
    lab: Lab
    student: User
    granted_by: User | None


def write_extension(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    student: User,
    due_at: datetime,
    granted_by: User | None,
    note: str = "",
) -> Extension:
    """Give a student their own due date (replacing an earlier extension of the same lab): the row
    only; app.policy.rules.grant_extension is the grant, which recounts what counts."""
    if role_in(session, user=student, course=course) is None:
        raise NotFound(
            f"{student.email} is not enrolled in {course.slug}; enrol them before granting "
            "an extension.",
            field="student",
        )
    if lab.due_at is None:
        raise Invalid(
            f"{lab.slug} has no due date, so there is nothing to extend; give the lab a due "
            "date first."
        )
    if due_at <= lab.due_at:
        raise Invalid(
            f"The extension ends at {when_text(due_at)}, not after the lab's own due "
            f"date ({when_text(lab.due_at)}); give a later time.",
            field="due_at",
        )
    if len(note) > 200:
        raise Invalid("The note is longer than 200 characters; shorten it.", field="note")
    _take_turn(session, lab=lab)
    row = _extension_of(session, lab=lab, student=student)
    if row is None:
        row = Extension(lab_id=lab.id, user_id=student.id, due_at=due_at)
        session.add(row)
    row.due_at = due_at
    row.granted_by_id = granted_by.id if granted_by else None
    row.note = note.strip()
    return row


def _take_turn(session: Session, *, lab: Lab) -> None:
    # Grants and revocations of one lab take turns on its row (a row lock on PostgreSQL, the
    # write lock on SQLite), so two at once never both insert a student's extension (a 500
    # before); the later one replaces the earlier's date. The lab's row, not the student's:
    # a grant then updates submissions' late flags and settles late days (app.policy.rules) in
    # the order a lab's new due date does (lab, submissions, the student's turn at their late
    # days), so it never waits crosswise on a grading that holds a submission and wants that turn.
    session.execute(
        update(Lab)
        .where(Lab.id == lab.id)
        .values(position=Lab.position)
        .execution_options(synchronize_session=False)
    )


def _extension_of(session: Session, *, lab: Lab, student: User) -> Extension | None:
    # Read afresh once the turn is ours: another request may have just written it.
    return session.scalar(
        select(Extension)
        .where(Extension.lab_id == lab.id, Extension.user_id == student.id)
        .execution_options(populate_existing=True)
    )


def delete_extension(session: Session, *, lab: Lab, student: User) -> bool:
    """Take an extension back, the row only (app.policy.rules.revoke_extension recounts); False
    when the student had none for this lab."""
    _take_turn(session, lab=lab)
    # A statement, not the row: of two revocations at once, the later finds nothing to delete.
    gone = session.execute(
        delete(Extension)
        .where(Extension.lab_id == lab.id, Extension.user_id == student.id)
        .execution_options(synchronize_session="fetch")
    )
    return bool(gone.rowcount)  # type: ignore[attr-defined]


def extensions_of(
    session: Session, *, course: Course, lab: Lab | None = None
) -> list[ExtensionRow]:
    """The course's extensions (one lab's, if given), by lab then student email."""
    query = (
        select(Extension, Lab, User)
        .join(Lab, Lab.id == Extension.lab_id)
        .join(User, User.id == Extension.user_id)
        .where(Lab.course_id == course.id)
        .order_by(Lab.slug, User.email)
    )
    if lab is not None:
        query = query.where(Lab.id == lab.id)
    rows = session.execute(query).all()
    grantor_ids = {ext.granted_by_id for ext, _, _ in rows if ext.granted_by_id}
    grantors = (
        {u.id: u for u in session.scalars(select(User).where(User.id.in_(grantor_ids)))}
        if grantor_ids
        else {}
    )
    return [
        ExtensionRow(
            extension=ext,
            lab=lab_row,
            student=student,
            granted_by=grantors.get(ext.granted_by_id) if ext.granted_by_id else None,
        )
        for ext, lab_row, student in rows
    ]
