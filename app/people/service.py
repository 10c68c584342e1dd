"""The people of a course as its staff manage them on the web: the list, adding and removing
a student or TA, changing a role, and a roster CSV previewed before it is applied.

Removing someone ends their enrolment only: their account, submissions and grades stay (the
gradebook lists enrolled students, so they leave it), and enrolling them again brings all back.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Invalid, NotFound
from app.courses.models import Course, Enrollment, Role
from app.courses.service import enroll
from app.users.models import Invite, InviteKind, User
from app.users.service import ensure_user, normalize_email

# A roster file larger than this is refused: a class of thousands is a few hundred KiB.
MAX_ROSTER_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Member:
    user: User
    role: Role
    can_log_in: bool  # has a web password
    invited: bool  # holds an invite from staff not used yet (it may have expired)


def members_of(session: Session, *, course: Course) -> list[Member]:
    """Everyone enrolled, staff first (instructors, then TAs), then students, by email."""
    rows = session.execute(
        select(User, Enrollment.role)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == course.id)
        .order_by(User.email)
    ).all()
    ids = [user.id for user, _ in rows]
    invited = (
        set(
            session.scalars(
                select(Invite.user_id).where(
                    Invite.user_id.in_(ids),
                    Invite.used_at.is_(None),
                    Invite.kind == InviteKind.invite.value,
                )
            )
        )
        if ids
        else set()
    )
    order = {Role.instructor: 0, Role.ta: 1, Role.student: 2}
    members = [
        Member(
            user=user,
            role=Role(role),
            can_log_in=user.password_hash is not None,
            invited=user.id in invited,
        )
        for user, role in rows
    ]
    return sorted(members, key=lambda m: (order[m.role], m.user.email))


def _enrolment(session: Session, *, course: Course, user: User) -> Enrollment:
    row = session.scalar(
        select(Enrollment).where(Enrollment.course_id == course.id, Enrollment.user_id == user.id)
    )
    if row is None:
        raise NotFound(f"{user.email} is not enrolled in {course.title}.")
    return row


def _instructors(session: Session, *, course: Course) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Enrollment)
            .where(Enrollment.course_id == course.id, Enrollment.role == Role.instructor.value)
        )
        or 0
    )


def _keep_an_instructor(session: Session, *, course: Course, row: Enrollment, doing: str) -> None:
    if row.role == Role.instructor.value and _instructors(session, course=course) <= 1:
        raise Conflict(
            f"That would {doing} the last instructor of {course.title}, and nobody could manage "
            "the course any more; make someone else an instructor first."
        )


def add_member(
    session: Session, *, course: Course, email: str, name: str, role: Role
) -> tuple[User, bool]:
    """Enrol a person (making their account if needed); True when they were not enrolled yet.
    Someone enrolled already keeps their role: changing it is `change_role`'s."""
    user = ensure_user(session, email=email, name=name)
    existing = session.scalar(
        select(Enrollment).where(Enrollment.course_id == course.id, Enrollment.user_id == user.id)
    )
    if existing is not None:
        raise Conflict(
            f"{user.email} is already {_article(existing.role)} {existing.role} in {course.title}; "
            "change their role in the list instead."
        )
    enroll(session, user=user, course=course, role=role)
    return user, True


def remove_member(session: Session, *, course: Course, user: User) -> Role:
    """End an enrolment; the account and its submissions stay. Returns the role it had."""
    row = _enrolment(session, course=course, user=user)
    _keep_an_instructor(session, course=course, row=row, doing="remove")
    session.delete(row)
    session.flush()
    return Role(row.role)


def change_role(session: Session, *, course: Course, user: User, role: Role) -> Role:
    """Give an enrolled person another role; returns the role they had."""
    row = _enrolment(session, course=course, user=user)
    was = Role(row.role)
    if was is role:
        return was
    _keep_an_instructor(session, course=course, row=row, doing="demote")
    row.role = role.value
    session.flush()
    return was


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


# --- a roster CSV, previewed, then applied -------------------------------------------------


@dataclass(frozen=True)
class RosterLine:
    line: int
    email: str
    name: str
    role: Role


@dataclass
class RosterPlan:
    """What applying a roster would change, computed from the file and the course as they are."""

    add: list[RosterLine] = field(default_factory=list)  # enrolled by the file
    new_accounts: list[str] = field(default_factory=list)  # of those, emails without an account
    role_changes: list[tuple[RosterLine, Role]] = field(default_factory=list)  # (line, was)
    unchanged: list[RosterLine] = field(default_factory=list)
    remove: list[User] = field(default_factory=list)  # students missing from the file
    problems: list[str] = field(default_factory=list)  # lines that cannot be applied

    @property
    def changes(self) -> int:
        return len(self.add) + len(self.role_changes) + len(self.remove)

    def digest(self) -> str:
        """What the plan would do, as a short fingerprint: applying checks it is still so."""
        shape = {
            "add": [(x.email, x.name, x.role.value) for x in self.add],
            "roles": [(x.email, x.role.value, was.value) for x, was in self.role_changes],
            "remove": sorted(u.email for u in self.remove),
        }
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def read_roster(text: str) -> tuple[list[RosterLine], list[str]]:
    """The lines of a roster CSV (header: email, and optionally name and role), with a
    sentence for each line that cannot be used."""
    reader = csv.DictReader(io.StringIO(text))
    fields = [(f or "").strip().lower() for f in reader.fieldnames or []]
    if "email" not in fields:
        raise Invalid(
            "The roster has no 'email' column: its first line must name the columns, such as "
            "email,name,role."
        )
    lines: list[RosterLine] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if k}
        if not any(row.values()):
            continue
        try:
            email = normalize_email(row.get("email", ""))
        except Invalid as exc:
            problems.append(f"Line {number}: {exc.message}")
            continue
        try:
            role = Role((row.get("role") or "student").lower())
        except ValueError:
            problems.append(
                f"Line {number}: the role '{row.get('role')}' is not student, ta or instructor."
            )
            continue
        if email in seen:
            problems.append(f"Line {number}: {email} is also on line {seen[email]}; keep one.")
            continue
        seen[email] = number
        lines.append(RosterLine(line=number, email=email, name=row.get("name", ""), role=role))
    return lines, problems


def plan_roster(
    session: Session, *, course: Course, text: str, remove_missing: bool = False
) -> RosterPlan:
    lines, problems = read_roster(text)
    plan = RosterPlan(problems=problems)
    enrolled = {
        user.email: (user, Role(role))
        for user, role in session.execute(
            select(User, Enrollment.role)
            .join(Enrollment, Enrollment.user_id == User.id)
            .where(Enrollment.course_id == course.id)
        )
    }
    emails = [line.email for line in lines]
    known = (
        set(session.scalars(select(User.email).where(User.email.in_(emails)))) if emails else set()
    )
    for line in lines:
        if line.email not in enrolled:
            plan.add.append(line)
            if line.email not in known:
                plan.new_accounts.append(line.email)
        elif enrolled[line.email][1] is not line.role:
            plan.role_changes.append((line, enrolled[line.email][1]))
        else:
            plan.unchanged.append(line)
    if remove_missing:
        listed = set(emails)
        plan.remove = [
            user
            for email, (user, role) in sorted(enrolled.items())
            if role is Role.student and email not in listed
        ]
    return plan


def apply_roster(session: Session, *, course: Course, plan: RosterPlan) -> list[User]:
    """Carry a plan out; returns the people it enrolled (for their invite links)."""
    added = []
    for line in plan.add:
        user = ensure_user(session, email=line.email, name=line.name)
        enroll(session, user=user, course=course, role=line.role)
        added.append(user)
    for line, _ in plan.role_changes:
        user = ensure_user(session, email=line.email, name=line.name)
        change_role(session, course=course, user=user, role=line.role)
    for user in plan.remove:
        remove_member(session, course=course, user=user)
    return added
