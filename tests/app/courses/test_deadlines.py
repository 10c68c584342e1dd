"""The due date in force for one student, and what a submission made now would meet."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.deadlines import Availability, deadline_for, lab_state
from app.courses.models import LatePolicy
from app.policy.rules import grant_extension
from app.submissions.status_words import status_tone, status_word
from tests.app.conftest import make_world


def test_an_extension_moves_one_students_due_date(session: Session) -> None:
    now = utcnow()
    world = make_world(session, due_at=now - timedelta(hours=1), late_policy=LatePolicy.refuse)
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=now + timedelta(days=1),
        granted_by=world.ta.user,
    )
    mine = deadline_for(session, lab=world.lab, user_id=world.student.user.id)
    theirs = deadline_for(session, lab=world.lab, user_id=world.other_student.user.id)
    assert mine.extended and mine.due_at == now + timedelta(days=1)
    assert not theirs.extended and theirs.due_at == world.lab.due_at
    assert lab_state(world.lab, mine, now=now, staff=False).accepts
    closed = lab_state(world.lab, theirs, now=now, staff=False)
    assert closed.availability is Availability.closed and closed.at == world.lab.due_at
    # Staff try labs out after the due date; only removing a lab closes it to them.
    assert lab_state(world.lab, theirs, now=now, staff=True).accepts
    world.lab.archived_at = now
    assert lab_state(world.lab, theirs, now=now, staff=True).availability is Availability.archived
    session.rollback()


def test_status_words_read_well_and_new_phases_need_no_code() -> None:
    assert status_word("compile_error") == "Compile error"
    assert status_word("compiled") == "Compiled, waiting for a GPU"
    assert status_word("timing") == "Verdicts in; timing" and status_tone("timing") == "busy"
    # A phase added later, unlisted, still reads as a word and as work in progress.
    assert status_word("profiling") == "Profiling" and status_tone("profiling") == "busy"
    assert status_tone("graded") == "done" and status_tone("error") == "failed"
