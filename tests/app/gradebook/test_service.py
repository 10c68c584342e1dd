"""The gradebook CSV: counted scores per policy, late flags, fixed column order."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Role, ScorePolicy
from app.courses.service import add_lab, enroll, move_lab
from app.gradebook.service import gradebook_csv
from app.submissions.models import Status
from app.submissions.service import set_status
from tests.app.conftest import TEST_LAB, make_member, make_world
from tests.app.factories import make_submission, minutes


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_best_policy_counts_the_highest_score_and_its_late_flag(session: Session) -> None:
    world = make_world(session, score_policy=ScorePolicy.best)
    t0 = utcnow() - timedelta(days=1)
    s, lab = world.student.user, world.lab
    make_submission(session, user=s, lab=lab, score=4, created_at=t0)
    make_submission(session, user=s, lab=lab, score=10, created_at=t0 + minutes(1), late=True)
    make_submission(session, user=s, lab=lab, score=6, created_at=t0 + minutes(2))
    # Still being graded, or failed on our side: neither counts.
    make_submission(session, user=s, lab=lab, status=Status.running, created_at=t0 + minutes(3))
    make_submission(session, user=s, lab=lab, status=Status.error, created_at=t0 + minutes(4))
    session.commit()
    table = rows(gradebook_csv(session, course=world.course))
    assert table[0] == [
        "student_id",
        "name",
        "email",
        "scale-test",
        "scale-test_late",
        "scale-test_pending",
        "total",
    ]
    by_email = {row[2]: row for row in table[1:]}
    # The running one is pending: the counted 10 may still change.
    assert by_email[s.email] == [str(s.id), s.name, s.email, "10", "1", "1", "10"]
    other = world.other_student.user
    assert by_email[other.email] == [str(other.id), other.name, other.email, "", "", "0", "0"]
    # Staff are not rows of the gradebook.
    assert {row[2] for row in table[1:]} == {s.email, other.email}


def test_last_policy_counts_the_latest_verdict_even_if_lower(session: Session) -> None:
    world = make_world(session, score_policy=ScorePolicy.last)
    t0 = utcnow() - timedelta(days=1)
    s, lab = world.student.user, world.lab
    make_submission(session, user=s, lab=lab, score=10, created_at=t0)
    make_submission(
        session,
        user=s,
        lab=lab,
        status=Status.compile_error,
        score=0,
        created_at=t0 + minutes(5),
        late=True,
    )
    make_submission(session, user=s, lab=lab, status=Status.queued, created_at=t0 + minutes(9))
    session.commit()
    table = rows(gradebook_csv(session, course=world.course))
    row = next(r for r in table if r[2] == s.email)
    assert row[3:] == ["0", "1", "1", "0"]


def test_a_regrade_under_way_keeps_the_earlier_verdict_counted(session: Session) -> None:
    world = make_world(session, score_policy=ScorePolicy.best)
    s, lab = world.student.user, world.lab
    submission, _ = make_submission(session, user=s, lab=lab, score=7)
    set_status(session, submission, Status.queued, "Queued again for a regrade.")
    session.commit()
    row = next(r for r in rows(gradebook_csv(session, course=world.course)) if r[2] == s.email)
    assert row[3:] == ["7", "0", "1", "7"]


def test_columns_follow_the_instructors_order_whatever_the_dates(session: Session) -> None:
    world = make_world(session)
    # A second lab, due earlier than the first: it still comes second, where it was added...
    world.lab.due_at = utcnow() + timedelta(days=10)
    early = add_lab(session, course=world.course, ref="vector-scale", due_at=utcnow())
    session.commit()
    assert rows(gradebook_csv(session, course=world.course))[0][3] == "scale-test"
    # ...until the instructor moves it up.
    assert move_lab(session, lab=early, by=-1)
    assert not move_lab(session, lab=early, by=-1)  # already first
    session.commit()
    header = rows(gradebook_csv(session, course=world.course))[0]
    assert header == [
        "student_id",
        "name",
        "email",
        early.slug,
        f"{early.slug}_late",
        f"{early.slug}_pending",
        "scale-test",
        "scale-test_late",
        "scale-test_pending",
        "total",
    ]
    make_submission(session, user=world.student.user, lab=early, score=3)
    make_submission(session, user=world.student.user, lab=world.lab, score=7)
    session.commit()
    table = rows(gradebook_csv(session, course=world.course))
    assert table[0] == header
    row = next(r for r in table if r[2] == world.student.email)
    assert row[3:] == ["3", "0", "0", "7", "0", "0", "10"]


def test_columns_follow_the_list_whatever_the_due_dates_and_moves_stop_at_the_ends(
    session: Session,
) -> None:
    world = make_world(session)
    world.lab.due_at = None  # "scale-test", first in the list
    due = utcnow() + timedelta(days=3)
    added = [
        add_lab(session, course=world.course, ref="vector-scale", due_at=due),
        add_lab(session, course=world.course, ref="hadamard", due_at=due - timedelta(days=1)),
        add_lab(session, course=world.course, ref="array-sum"),
    ]
    session.commit()

    def columns() -> list[str]:
        return rows(gradebook_csv(session, course=world.course))[0][3::3][:-1]

    assert columns() == ["scale-test", "vector-scale", "hadamard", "array-sum"]
    assert move_lab(session, lab=added[2], by=-2)
    assert columns() == ["scale-test", "array-sum", "vector-scale", "hadamard"]
    assert move_lab(session, lab=world.lab, by=10)  # past the end: last
    assert columns() == ["array-sum", "vector-scale", "hadamard", "scale-test"]
    assert not move_lab(session, lab=world.lab, by=1)
    assert not move_lab(session, lab=added[2], by=-1)


def test_a_formula_in_a_name_is_not_run_by_a_spreadsheet(session: Session) -> None:
    world = make_world(session)
    member = make_member(session, world.course, Role.student)
    member.user.name = "=HYPERLINK(1)"
    enroll(session, user=member.user, course=world.course, role=Role.student)
    session.commit()
    table = rows(gradebook_csv(session, course=world.course))
    assert [r[1] for r in table if r[2] == member.email] == ["'=HYPERLINK(1)"]


def test_lab_folder_is_accepted_as_a_lab(session: Session) -> None:
    world = make_world(session)
    assert world.lab.slug == "scale-test"
    assert world.lab.folder == str(TEST_LAB.resolve())
    assert world.lab.max_score == 10.0
