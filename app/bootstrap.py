"""First run on an empty database: a demo course with every built-in lab and an instructor,
who is also the installation's first site administrator (staff of the demo course by their
enrolment, not by that)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import DomainError
from app.core.security import new_password
from app.courses.models import Role
from app.courses.service import add_lab, create_course, enroll
from app.courses.specs import list_builtin_labs
from app.users.models import User
from app.users.service import create_api_token, ensure_user

log = logging.getLogger(__name__)

DEMO_COURSE = "demo"
DEMO_INSTRUCTOR = "instructor@example.com"
# The demo course lists the built-in labs in the order a course would teach them (the README's
# order); a built-in lab missing here goes after these. Instructors reorder on the course page.
TEACHING_ORDER = [
    "vector-scale",
    "hadamard",
    "array-sum",
    "array-sum-atomic",
    "dot-product",
    "matmul-naive",
    "matmul-tiled",
    "matmul-tiled-int",
    "matmul-tiled-f64",
    "matmul-coarsened",
    "conv2d",
    "conv1d-tiled",
    "matrix-transpose",
    "softmax",
    "histogram",
    "prefix-sum",
]


def teaching_order(lab_ids: list[str]) -> list[str]:
    known = {lab_id: i for i, lab_id in enumerate(TEACHING_ORDER)}
    return sorted(lab_ids, key=lambda lab_id: (known.get(lab_id, len(known)), lab_id))


@dataclass
class FirstRun:
    email: str
    password: str
    token: str
    labs: list[str]
    skipped: list[str]


def bootstrap_if_empty(session: Session) -> FirstRun | None:
    """Create the demo course and its instructor when there are no users; else do nothing."""
    if session.scalar(select(func.count()).select_from(User)):
        return None
    course = create_course(session, slug=DEMO_COURSE, title="Demo course")
    labs, skipped = [], []
    for lab_id in teaching_order(list_builtin_labs()):
        try:
            add_lab(session, course=course, ref=lab_id)
            labs.append(lab_id)
        except DomainError as exc:  # one broken lab folder must not block the first run
            log.warning("built-in lab %s was not added: %s", lab_id, exc.message)
            skipped.append(f"{lab_id}: {exc.message}")
    password = new_password()
    user = ensure_user(session, email=DEMO_INSTRUCTOR, name="Demo Instructor", password=password)
    enroll(session, user=user, course=course, role=Role.instructor)
    user.is_site_admin = True
    token = create_api_token(session, user=user, name="first run")
    return FirstRun(email=user.email, password=password, token=token, labs=labs, skipped=skipped)
