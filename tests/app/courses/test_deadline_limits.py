"""Due dates and extensions at their limits: exactly at a due date and one microsecond past it,
every state a lab can be in for a student and for staff, late flags recomputed in batches.

Written against the survivors of scripts/mutation.py (app/courses/deadlines.py, extensions.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Invalid, NotFound
from app.courses.deadlines import (
    Availability,
    Deadline,
    LabState,
    deadline_for,
    deadline_from,
    extensions_by_user,
    lab_state,
)
from app.courses.extensions import extensions_of
from app.courses.models import Extension, LatePolicy, Role
from app.courses.service import add_lab
from app.policy.rules import grant_extension, refresh_late_flags, revoke_extension
from app.submissions.models import Submission
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission

DUE = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)


def test_exactly_at_the_due_date_is_on_time_and_a_microsecond_past_is_late() -> None:
    deadline = Deadline(due_at=DUE, lab_due_at=DUE, extended=False)
    assert not deadline.is_late(DUE - TICK)
    assert not deadline.is_late(DUE)
    assert deadline.is_late(DUE + TICK)
    never = Deadline(due_at=None, lab_due_at=None, extended=False)
    assert not never.is_late(datetime.max.replace(tzinfo=UTC))


def test_an_extension_counts_only_where_the_lab_has_a_due_date(world: World) -> None:
    later = DUE + timedelta(days=2)
    extension = Extension(lab_id=world.lab.id, user_id=world.student.user.id, due_at=later)
    world.lab.due_at = DUE
    assert deadline_from(world.lab, extension) == Deadline(later, DUE, True)
    assert deadline_from(world.lab, None) == Deadline(DUE, DUE, False)
    world.lab.due_at = None
    assert deadline_from(world.lab, extension) == Deadline(None, None, False)


def _state(world: World, *, now: datetime, staff: bool = False, due: datetime = DUE) -> LabState:
    return lab_state(world.lab, Deadline(due, world.lab.due_at, False), now=now, staff=staff)


def test_every_state_of_a_lab_for_a_student(world: World) -> None:
    world.lab.due_at, world.lab.release_at = DUE, DUE - timedelta(days=7)
    world.lab.late_policy = LatePolicy.accept.value
    release = world.lab.release_at
    assert _state(world, now=release - TICK) == LabState(Availability.not_released, release, False)
    assert _state(world, now=release) == LabState(Availability.open, None, False)
    assert _state(world, now=DUE) == LabState(Availability.open, None, False)
    assert _state(world, now=DUE + TICK) == LabState(Availability.open, None, True)
    world.lab.late_policy = LatePolicy.refuse.value
    assert _state(world, now=DUE) == LabState(Availability.open, None, False)
    closed = _state(world, now=DUE + TICK)
    assert closed == LabState(Availability.closed, DUE, True) and not closed.accepts
    world.lab.archived_at = DUE - timedelta(days=1)
    gone = _state(world, now=DUE - timedelta(days=2))
    assert gone == LabState(Availability.archived, world.lab.archived_at, False)
    assert not gone.accepts


def test_staff_meet_an_open_lab_before_release_and_after_the_due_date(world: World) -> None:
    world.lab.due_at, world.lab.release_at = DUE, DUE - timedelta(days=7)
    world.lab.late_policy = LatePolicy.refuse.value
    before = _state(world, now=DUE - timedelta(days=8), staff=True)
    assert before == LabState(Availability.open, None, False) and before.accepts
    after = _state(world, now=DUE + TICK, staff=True)
    assert after == LabState(Availability.open, None, True) and after.accepts
    world.lab.archived_at = DUE
    assert _state(world, now=DUE, staff=True).availability is Availability.archived


def test_the_due_date_in_force_is_read_from_the_students_own_extension(
    session: Session, world: World
) -> None:
    world.lab.due_at = DUE
    later = DUE + timedelta(days=1)
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=later,
        granted_by=None,
    )
    mine = deadline_for(session, lab=world.lab, user_id=world.student.user.id)
    assert mine == Deadline(later, DUE, True)
    theirs = deadline_for(session, lab=world.lab, user_id=world.other_student.user.id)
    assert theirs == Deadline(DUE, DUE, False)
    assert set(extensions_by_user(session, lab=world.lab)) == {world.student.user.id}
    # The extension is for that lab only.
    other_lab = add_lab(session, course=world.course, ref="hadamard", due_at=DUE)
    assert deadline_for(session, lab=other_lab, user_id=world.student.user.id) == Deadline(
        DUE, DUE, False
    )
    assert extensions_by_user(session, lab=other_lab) == {}


def _late_flags(session: Session, world: World) -> dict[int, bool]:
    rows = session.execute(
        select(Submission.id, Submission.late).where(Submission.lab_id == world.lab.id)
    )
    return {sub_id: late for sub_id, late in rows}


def test_late_flags_follow_the_due_date_and_count_what_changed(
    session: Session, world: World
) -> None:
    world.lab.due_at = DUE
    on_time = make_submission(
        session, user=world.student.user, lab=world.lab, created_at=DUE, late=True
    )[0]
    late = make_submission(
        session, user=world.student.user, lab=world.lab, created_at=DUE + TICK, late=False
    )[0]
    other = make_submission(
        session, user=world.other_student.user, lab=world.lab, created_at=DUE + TICK, late=False
    )[0]
    # One author's only: the other student's flag stays as it was.
    assert refresh_late_flags(session, lab=world.lab, user_id=world.student.user.id) == 2
    assert _late_flags(session, world) == {on_time.id: False, late.id: True, other.id: False}
    assert refresh_late_flags(session, lab=world.lab) == 1
    assert _late_flags(session, world)[other.id] is True
    assert refresh_late_flags(session, lab=world.lab) == 0
    world.lab.due_at = None
    assert refresh_late_flags(session, lab=world.lab) == 2


def test_more_late_flags_than_one_batch_all_change(session: Session, world: World) -> None:
    world.lab.due_at = DUE
    made = [
        make_submission(
            session, user=world.student.user, lab=world.lab, created_at=DUE + TICK, late=False
        )[0].id
        for _ in range(1001)
    ]
    assert refresh_late_flags(session, lab=world.lab) == 1001
    flags = _late_flags(session, world)
    assert all(flags[sub_id] for sub_id in made)


# --- extensions ---


def _grant(session: Session, world: World, due_at: datetime, note: str = "") -> Extension:
    return grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=due_at,
        granted_by=world.ta.user,
        note=note,
    )


def test_an_extension_must_end_after_the_labs_own_due_date(session: Session, world: World) -> None:
    world.lab.due_at = DUE
    with pytest.raises(Invalid) as same:
        _grant(session, world, DUE)
    assert str(same.value) == (
        "The extension ends at 2030-03-01 12:00 UTC, not after the lab's own due date "
        "(2030-03-01 12:00 UTC); give a later time."
    )
    assert _grant(session, world, DUE + TICK).due_at == DUE + TICK


def test_an_extension_of_a_lab_without_a_due_date_is_refused(
    session: Session, world: World
) -> None:
    world.lab.due_at = None
    with pytest.raises(Invalid) as refused:
        _grant(session, world, DUE)
    assert str(refused.value) == (
        f"{world.lab.slug} has no due date, so there is nothing to extend; give the lab a due "
        "date first."
    )


def test_only_an_enrolled_student_gets_an_extension(session: Session, world: World) -> None:
    world.lab.due_at = DUE
    with pytest.raises(NotFound) as refused:
        grant_extension(
            session,
            course=world.course,
            lab=world.lab,
            student=world.outsider.user,
            due_at=DUE + TICK,
            granted_by=None,
        )
    assert str(refused.value) == (
        f"{world.outsider.user.email} is not enrolled in {world.course.slug}; enrol them "
        "before granting an extension."
    )


def test_a_note_of_200_characters_is_kept_and_201_refused(session: Session, world: World) -> None:
    world.lab.due_at = DUE
    # The length counts what was typed; the note kept is stripped.
    kept = _grant(session, world, DUE + TICK, note="  " + "n" * 196 + "  ")
    assert kept.note == "n" * 196
    assert _grant(session, world, DUE + TICK, note="n" * 200).note == "n" * 200
    with pytest.raises(Invalid) as refused:
        _grant(session, world, DUE + TICK, note="n" * 201)
    assert str(refused.value) == "The note is longer than 200 characters; shorten it."


def test_a_second_grant_replaces_the_first_and_a_revoke_restores_the_lab_date(
    session: Session, world: World
) -> None:
    world.lab.due_at = DUE
    sub = make_submission(
        session, user=world.student.user, lab=world.lab, created_at=DUE + TICK, late=True
    )[0]
    first = _grant(session, world, DUE + timedelta(days=1), note="first")
    assert first.granted_by_id == world.ta.user.id and sub.late is False
    second = grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=DUE + timedelta(days=2),
        granted_by=None,
    )
    assert second.id == first.id and second.due_at == DUE + timedelta(days=2)
    assert second.granted_by_id is None and second.note == ""
    assert revoke_extension(session, lab=world.lab, student=world.student.user) is True
    session.refresh(sub)
    assert sub.late is True
    assert revoke_extension(session, lab=world.lab, student=world.student.user) is False


def test_extensions_are_listed_by_lab_then_email_with_who_granted_them(
    session: Session,
) -> None:
    world = make_world(session, due_at=DUE)
    second_lab = make_world(session, due_at=DUE).lab  # another course's lab: not listed
    students = sorted(
        (make_member(session, world.course, Role.student) for _ in range(3)),
        key=lambda m: m.user.email,
        reverse=True,
    )
    for member in students:
        grant_extension(
            session,
            course=world.course,
            lab=world.lab,
            student=member.user,
            due_at=DUE + timedelta(days=1),
            granted_by=world.ta.user if member is students[0] else None,
        )
    listed = extensions_of(session, course=world.course)
    assert [row.student.email for row in listed] == sorted(m.user.email for m in students)
    assert [row.granted_by for row in listed] == [None, None, world.ta.user]
    assert all(row.lab.id == world.lab.id for row in listed)
    assert extensions_of(session, course=world.course, lab=second_lab) == []
    assert len(extensions_of(session, course=world.course, lab=world.lab)) == 3


def test_extensions_are_per_lab_and_per_student(session: Session, world: World) -> None:
    world.lab.due_at = DUE
    other_lab = add_lab(session, course=world.course, ref="hadamard", due_at=DUE)
    student, other = world.student.user, world.other_student.user
    # Granted in an order where a lookup by lab alone, or by student alone, finds another row.
    for lab, who in ((other_lab, student), (world.lab, other), (world.lab, student)):
        grant_extension(
            session,
            course=world.course,
            lab=lab,
            student=who,
            due_at=DUE + timedelta(days=1),
            granted_by=None,
        )
    assert len(extensions_of(session, course=world.course)) == 3
    # By lab slug ("hadamard" before the test lab's), then by email.
    listed = [
        (row.lab.slug, row.student.email) for row in extensions_of(session, course=world.course)
    ]
    assert listed == sorted(listed) and listed[0][0] == "hadamard"
    assert revoke_extension(session, lab=world.lab, student=student) is True
    left = {(row.lab.id, row.student.id) for row in extensions_of(session, course=world.course)}
    assert left == {(other_lab.id, student.id), (world.lab.id, other.id)}


def test_granting_or_revoking_one_students_extension_leaves_the_others_flags(
    session: Session, world: World
) -> None:
    world.lab.due_at = DUE
    # A flag another change will set right: not this grant's business.
    theirs = make_submission(
        session, user=world.other_student.user, lab=world.lab, created_at=DUE + TICK, late=False
    )[0]
    _grant(session, world, DUE + timedelta(days=1))
    assert revoke_extension(session, lab=world.lab, student=world.student.user)
    session.refresh(theirs)
    assert theirs.late is False


def test_days_late_are_started_days_past_the_due_date() -> None:
    deadline = Deadline(due_at=DUE, lab_due_at=DUE, extended=False)
    day = timedelta(days=1)
    assert [deadline.days_late(DUE + d) for d in (-day, -TICK, timedelta(0))] == [0, 0, 0]
    assert [deadline.days_late(DUE + d) for d in (TICK, day, day + TICK)] == [1, 1, 2]
    assert Deadline(None, None, False).days_late(DUE) == 0


def test_a_lab_that_refuses_late_work_waits_the_late_days_a_student_has_left(
    world: World,
) -> None:
    world.lab.due_at, world.lab.late_policy = DUE, LatePolicy.refuse.value
    deadline = Deadline(DUE, DUE, False)
    day = timedelta(days=1)

    def state(now: datetime, late_days: int) -> LabState:
        return lab_state(world.lab, deadline, now=now, staff=False, late_days=late_days)

    assert state(DUE + TICK, 1) == LabState(Availability.open, None, True)
    assert state(DUE + day, 1) == LabState(Availability.open, None, True)
    assert state(DUE + day + TICK, 1) == LabState(Availability.closed, DUE + day, True)
    assert state(DUE + TICK, 0) == LabState(Availability.closed, DUE, True)
