"""Courses, enrolments and labs."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class Role(enum.StrEnum):
    student = "student"
    ta = "ta"
    instructor = "instructor"

    @property
    def is_staff(self) -> bool:
        return self is not Role.student


class ScorePolicy(enum.StrEnum):
    best = "best"
    last = "last"


class LatePolicy(enum.StrEnum):
    accept = "accept"
    refuse = "refuse"


class Course(Base):
    __tablename__ = "courses"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Late days each student may spend across the course's labs (0: no budget), and at most
    # how many on one lab (None: as many as are left); a lab may set its own cap.
    late_days: Mapped[int] = mapped_column(default=0, server_default="0")
    late_day_cap: Mapped[int | None] = mapped_column(default=None)
    # Days after a lab's grades are released during which its students may ask for a regrade.
    regrade_window_days: Mapped[int] = mapped_column(default=7, server_default="7")
    # Owed since then: every student's late days to be settled again after a policy change,
    # a short batch of students at a time (app.policy.recount); None when none is owed.
    late_days_recount_at: Mapped[datetime | None] = mapped_column(default=None)
    # Students (by id) up to this one are recounted already.
    late_days_recounted_to: Mapped[int] = mapped_column(default=0, server_default="0")
    # Archived by its instructors (a term that is over): gone from everyone's list of courses
    # and closed for uploads; its labs, people, submissions and grades all stay, and restoring
    # it brings it back as it was.
    archived_at: Mapped[datetime | None] = mapped_column(default=None)


class Enrollment(Base):
    __tablename__ = "enrollments"
    __table_args__ = (UniqueConstraint("user_id", "course_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Lab(Base):
    __tablename__ = "labs"
    __table_args__ = (UniqueConstraint("course_id", "slug"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(64))  # the lab id from its spec
    title: Mapped[str] = mapped_column(String(200))
    # Either a built-in lab id (reference_kernels/<id>) or an absolute folder path.
    builtin_id: Mapped[str | None] = mapped_column(String(64), default=None)
    folder: Mapped[str | None] = mapped_column(String(1000), default=None)
    release_at: Mapped[datetime | None] = mapped_column(default=None)
    due_at: Mapped[datetime | None] = mapped_column(default=None)
    score_policy: Mapped[str] = mapped_column(String(10), default=ScorePolicy.best.value)
    late_policy: Mapped[str] = mapped_column(String(10), default=LatePolicy.accept.value)
    # Cached from the spec so the gradebook does not parse every lab folder.
    max_score: Mapped[float] = mapped_column(default=0.0)
    # The GPU model its timings belong to, overriding the spec's timing.gpu_model; "" keeps it.
    gpu_model: Mapped[str] = mapped_column(String(200), default="")
    # The content digest (graders LabSpec.digest) of the lab folder as last checked and read,
    # by `lab add` or `lab update` (or the settings page); "" before it was recorded.
    digest: Mapped[str] = mapped_column(String(64), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Removed by the staff: hidden from students' lists and the gradebook, closed for
    # submissions; its submissions stay, and restoring it brings everything back.
    archived_at: Mapped[datetime | None] = mapped_column(default=None)
    # Where the lab stands in its course's list, as the instructor orders it (smaller first);
    # a new lab goes last. Every list of labs (pages, gradebook, API) follows it.
    position: Mapped[int] = mapped_column(default=0, server_default="0")
    # Most students in one team (1: everyone submits alone).
    team_size: Mapped[int] = mapped_column(default=1, server_default="1")
    # This lab's own cap on late days (None: the course's).
    late_day_cap: Mapped[int | None] = mapped_column(default=None)
    # Percent of the counted score lost per late day the budget does not cover (0: none).
    late_penalty: Mapped[float] = mapped_column(default=0.0, server_default="0")
    # When the staff released the grades (see app.courses.release); None: at the default.
    grades_released_at: Mapped[datetime | None] = mapped_column(default=None)


class Extension(Base):
    """One student's own due date for one lab, granted by the staff."""

    __tablename__ = "extensions"
    __table_args__ = (UniqueConstraint("lab_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    due_at: Mapped[datetime]
    granted_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    note: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LeaderboardEntry(Base):
    """A student's opt-in to a lab's leaderboard, under a pseudonym of their choosing."""

    __tablename__ = "leaderboard_entries"
    __table_args__ = (
        UniqueConstraint("lab_id", "user_id"),
        UniqueConstraint("lab_id", "pseudonym_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    pseudonym: Mapped[str] = mapped_column(String(40))
    # Lower-cased, so "Warp9" and "warp9" cannot both appear on one board.
    pseudonym_key: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
