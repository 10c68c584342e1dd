"""Courses, enrolments and labs."""

from __future__ import annotations

import csv
import enum
import io
import re
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Forbidden, Invalid, NotFound
from app.core.settings import get_settings
from app.core.timefmt import when_text
from app.courses.models import Course, Enrollment, Lab, LatePolicy, Role, ScorePolicy
from app.courses.specs import folder_of, read_spec, resolve_lab_ref
from app.users.models import User
from app.users.service import ensure_user

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# Course slugs that are page addresses of their own (/courses/new).
RESERVED_SLUGS = frozenset({"new"})


def course_problems(session: Session, *, slug: str, title: str) -> dict[str, str]:
    """What is wrong with a new course's slug and title, a sentence per field ({}: nothing)."""
    problems = {}
    if not _SLUG.match(slug):
        problems["slug"] = (
            f"'{slug}' is not a course slug; use lower-case letters, digits, '-' and '_' "
            "(at most 64, starting with a letter or digit)."
        )
    elif slug in RESERVED_SLUGS:
        problems["slug"] = f"'{slug}' is the address of the new-course page; pick another slug."
    elif session.scalar(select(Course.id).where(Course.slug == slug)) is not None:
        problems["slug"] = f"A course named {slug} already exists; pick another slug."
    if len(title.strip()) > 200:
        problems["title"] = "The course title is longer than 200 characters; shorten it."
    return problems


def create_course(session: Session, *, slug: str, title: str) -> Course:
    problems = course_problems(session, slug=slug, title=title)
    if problems:
        taken = list(problems) == ["slug"] and _SLUG.match(slug)
        raise (Conflict if taken else Invalid)(" ".join(problems.values()))
    course = Course(slug=slug, title=title.strip() or slug)
    session.add(course)
    session.flush()
    return course


def get_course(session: Session, *, slug: str) -> Course:
    course = session.scalar(select(Course).where(Course.slug == slug))
    if course is None:
        raise NotFound(f"There is no course named {slug}.")
    return course


def role_in(session: Session, *, user: User, course: Course) -> Role | None:
    value = session.scalar(
        select(Enrollment.role).where(
            Enrollment.user_id == user.id, Enrollment.course_id == course.id
        )
    )
    return Role(value) if value else None


def is_staff_anywhere(session: Session, *, user_id: int) -> bool:
    """Whether the user is a TA or an instructor of some course."""
    return bool(
        session.scalar(
            select(Enrollment.id)
            .where(Enrollment.user_id == user_id, Enrollment.role != Role.student.value)
            .limit(1)
        )
    )


def require_member(session: Session, *, user: User, course: Course) -> Role:
    role = role_in(session, user=user, course=course)
    if role is None:
        raise Forbidden(
            f"You are not enrolled in {course.slug}; ask the course's instructor to add you."
        )
    return role


def require_staff(session: Session, *, user: User, course: Course) -> Role:
    role = require_member(session, user=user, course=course)
    if not role.is_staff:
        raise Forbidden(f"Only the staff of {course.slug} (TAs and instructors) may see this.")
    return role


def require_instructor(session: Session, *, user: User, course: Course) -> Role:
    role = require_member(session, user=user, course=course)
    if role is not Role.instructor:
        raise Forbidden(f"Only the instructors of {course.slug} may change its labs.")
    return role


def enroll(session: Session, *, user: User, course: Course, role: Role) -> Enrollment:
    row = session.scalar(
        select(Enrollment).where(Enrollment.user_id == user.id, Enrollment.course_id == course.id)
    )
    if row is None:
        row = Enrollment(user_id=user.id, course_id=course.id, role=role.value)
        session.add(row)
    else:
        row.role = role.value
    session.flush()
    return row


def courses_of(
    session: Session, *, user: User, archived: bool = False
) -> list[tuple[Course, Role]]:
    """The courses the user is enrolled in, with their role: those running, or only the
    archived ones when `archived` is true."""
    kept = Course.archived_at.is_not(None) if archived else Course.archived_at.is_(None)
    rows = session.execute(
        select(Course, Enrollment.role)
        .join(Enrollment, Enrollment.course_id == Course.id)
        .where(Enrollment.user_id == user.id, kept)
        .order_by(Course.slug)
    ).all()
    return [(course, Role(role)) for course, role in rows]


def import_roster(session: Session, *, course: Course, text: str) -> list[User]:
    """Enrol everyone in a CSV with a header: email (required), name, role (default student),
    password (optional: sets the web login; without it an existing password is kept)."""
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if "email" not in fields:
        raise Invalid("The roster has no 'email' column; its header must name email, name, role.")
    users = []
    for number, raw in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        if not row.get("email"):
            continue
        try:
            role = Role(row.get("role") or "student")
        except ValueError:
            raise Invalid(
                f"Roster line {number}: role '{row.get('role')}' is not student, ta or instructor."
            ) from None
        try:
            user = ensure_user(
                session,
                email=row["email"],
                name=row.get("name", ""),
                password=row.get("password") or None,
            )
        except Invalid as exc:
            raise Invalid(f"Roster line {number}: {exc.message}") from None
        enroll(session, user=user, course=course, role=role)
        users.append(user)
    return users


def add_lab(
    session: Session,
    *,
    course: Course,
    ref: str,
    release_at: datetime | None = None,
    due_at: datetime | None = None,
    score_policy: ScorePolicy = ScorePolicy.best,
    late_policy: LatePolicy = LatePolicy.accept,
    gpu_model: str = "",
) -> Lab:
    builtin_id, folder, spec = resolve_lab_ref(ref)
    existing = session.scalar(select(Lab).where(Lab.course_id == course.id, Lab.slug == spec.id))
    if existing is not None:
        if existing.archived_at is not None:
            raise Conflict(
                f"The course {course.slug} already has a lab {spec.id}, removed earlier; bring "
                f"it back with `kernelgrader lab restore {course.slug} {spec.id}`."
            )
        raise Conflict(
            f"The course {course.slug} already has a lab {spec.id}; change it with "
            f"`kernelgrader lab update {course.slug} {spec.id}`."
        )
    if release_at and due_at and due_at < release_at:
        raise Invalid("The due date is before the release date; swap them or fix one.")
    lab = Lab(
        course_id=course.id,
        slug=spec.id,
        title=spec.title,
        builtin_id=builtin_id,
        folder=folder,
        release_at=release_at,
        due_at=due_at,
        score_policy=score_policy.value,
        late_policy=late_policy.value,
        max_score=float(spec.max_score),
        gpu_model=gpu_model.strip(),
        digest=spec.digest,
        position=_next_position(session, course),
    )
    session.add(lab)
    session.flush()
    return lab


def labs_of(session: Session, *, course: Course, archived: bool = False) -> list[Lab]:
    """The course's labs in the order its instructors set (`position`; a new lab goes last),
    which every page, the gradebook and the API follow. Removed (archived) labs only when
    `archived` is true, and then only those."""
    query = select(Lab).where(Lab.course_id == course.id)
    if archived:
        query = query.where(Lab.archived_at.is_not(None))
    else:
        query = query.where(Lab.archived_at.is_(None))
    return list(session.scalars(query.order_by(Lab.position, Lab.id)))


def move_lab(session: Session, *, lab: Lab, by: int) -> bool:
    """Move a lab `by` places in its course's list (negative: earlier), among the labs still
    shown; False when it is already at that end. The positions are renumbered 1, 2, 3, ..."""
    course = session.get_one(Course, lab.course_id)
    shown = labs_of(session, course=course)
    if lab not in shown:
        raise Invalid(f"{lab.slug} was removed; restore it before moving it in the list.")
    at = shown.index(lab)
    to = max(0, min(len(shown) - 1, at + by))
    if to == at:
        return False
    shown.insert(to, shown.pop(at))
    for position, row in enumerate(shown, start=1):
        row.position = position
    session.flush()
    return True


def _next_position(session: Session, course: Course) -> int:
    last = session.scalar(select(func.max(Lab.position)).where(Lab.course_id == course.id))
    return (last or 0) + 1


def get_lab(session: Session, *, course: Course, slug: str) -> Lab:
    lab = session.scalar(select(Lab).where(Lab.course_id == course.id, Lab.slug == slug))
    if lab is None:
        raise NotFound(f"The course {course.slug} has no lab {slug}.")
    return lab


def find_lab(session: Session, *, course: str, lab: str) -> tuple[Course, Lab]:
    """A course and one of its labs, by their slugs (NotFound, in a sentence, for either)."""
    found = get_course(session, slug=course)
    return found, get_lab(session, course=found, slug=lab)


class Keep(enum.Enum):
    """`update_lab`'s marker for "leave this as it is" (None clears a date)."""

    keep = "keep"


KEEP = Keep.keep


def check_lab_dates(release_at: datetime | None, due_at: datetime | None) -> None:
    if release_at and due_at and due_at < release_at:
        raise Invalid(
            "The due date would be before the release date; swap them or fix one.", field="due_at"
        )


def update_lab_row(
    session: Session,
    *,
    lab: Lab,
    release_at: datetime | None | Keep = KEEP,
    due_at: datetime | None | Keep = KEEP,
    score_policy: ScorePolicy | None = None,
    late_policy: LatePolicy | None = None,
) -> list[str]:
    """Change a lab's dates and policies, the row only; return a sentence per change. The change
    that also moves what counts (late flags, late days) is app.policy.rules.update_lab."""
    new_release = lab.release_at if isinstance(release_at, Keep) else release_at
    new_due = lab.due_at if isinstance(due_at, Keep) else due_at
    check_lab_dates(new_release, new_due)
    changes = []
    if new_release != lab.release_at:
        lab.release_at = new_release
        changes.append(f"opens {_when_text(new_release, 'at once')}")
    if new_due != lab.due_at:
        lab.due_at = new_due
        changes.append(f"due {_when_text(new_due, 'never (no due date)')}")
    if score_policy is not None and score_policy.value != lab.score_policy:
        lab.score_policy = score_policy.value
        changes.append(f"counts each student's {score_policy.value} submission")
    if late_policy is not None and late_policy.value != lab.late_policy:
        lab.late_policy = late_policy.value
        changes.append(
            "accepts late submissions (marked late)"
            if late_policy is LatePolicy.accept
            else "refuses late submissions"
        )
    session.flush()
    return changes


def reread_lab(session: Session, *, lab: Lab) -> list[str]:
    """Read the lab's folder again; where its content changed (a new digest), check it (the
    checks of `lab check` that need no GPU) and record its title, max score and digest. Return
    a sentence per change; raise Invalid with the failed checks, changing nothing, when the
    changed folder fails them."""
    spec = read_spec(lab)
    folder = folder_of(lab)
    if spec.id != lab.slug:
        raise Invalid(
            f"The lab folder {folder} now holds the lab {spec.id}, not {lab.slug}; put its id "
            "back, or add it as a new lab."
        )
    if spec.digest == lab.digest:
        return []
    from graders.labcheck import check_lab

    report = check_lab(folder, run=False, engine=get_settings().engine())
    if not report.ok:
        problems = "; ".join(
            f"{item.subject}: {item.message.splitlines()[0]}" for item in report.failures
        )
        raise Invalid(
            f"The lab folder {folder} changed and fails its checks, so nothing was saved: "
            f"{problems}. Fix the folder (`kernelgrader lab check {folder}` shows every check) "
            "and save again."
        )
    changes = []
    if spec.title != lab.title:
        changes.append(f"is titled {spec.title!r}")
        lab.title = spec.title
    if float(spec.max_score) != lab.max_score:
        changes.append(f"is worth {spec.max_score:g} points (was {lab.max_score:g})")
        lab.max_score = float(spec.max_score)
    was = f" (was {lab.digest[:12]})" if lab.digest else ""
    changes.append(f"grades against lab version {spec.digest[:12]}{was}")
    lab.digest = spec.digest
    session.flush()
    return changes


def _when_text(value: datetime | None, none: str) -> str:
    return when_text(value, none)


def archive_lab(session: Session, *, lab: Lab, now: datetime) -> bool:
    """Remove a lab from students' lists and the gradebook; its submissions stay. False when
    it was removed already."""
    if lab.archived_at is not None:
        return False
    lab.archived_at = now
    session.flush()
    return True


def restore_lab(session: Session, *, lab: Lab) -> bool:
    if lab.archived_at is None:
        return False
    lab.archived_at = None
    session.flush()
    return True
