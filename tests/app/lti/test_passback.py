"""What reaches the LMS's grade column: the score as the gradebook counts it (the late penalty
taken, rubric points added once the grades are released, not before), and a score that changes
while the previous one is on its way is sent next, not lost."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.courses.models import Lab
from app.lti.grades import send_due_scores
from app.lti.models import LtiScoreSync, SyncState
from app.lti.scores import note_grading
from app.rubric.service import add_item, grade, remove_item, update_item
from app.users.models import User
from tests.app.conftest import World
from tests.app.factories import make_submission
from tests.app.lti.platform import TestPlatform
from tests.app.lti.test_services import _grade, _setup, _user


def _rubric(session: Session, world: World, user: User, points: float) -> None:
    item = add_item(session, lab=world.lab, title="Report", max_points=5)
    grade(
        session,
        course=world.course,
        lab=world.lab,
        student=user,
        scores={item.id: (points, "")},
        by=world.ta.user,
        now=utcnow(),
    )
    session.commit()


def test_the_score_sent_is_the_gradebooks_late_penalty_taken_and_rubric_points_added(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    due = utcnow() - timedelta(days=2)
    # 10 % of the score per day late and not covered; no late days; released at the due date.
    world.lab.due_at, world.lab.late_penalty = due, 10.0
    session.commit()
    user = _user(session, ada.email)
    _rubric(session, world, user, 2.0)
    # Handed in 3 hours after the due date: one day late, 8 points less 10 %, plus 2.
    _grade(session, world, user, 8.0, created_at=due + timedelta(hours=3), late=True)
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    item = next(iter(course.line_items.values()))
    assert item.grades == {ada.sub: 9.2}
    # Out of the lab's maximum as the gradebook and both CSVs have it: the 5-point item in it.
    assert item.received[-1]["scoreMaximum"] == world.lab.max_score + 5


def test_the_maximum_sent_follows_the_rubric_items_added_edited_and_removed(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    user = _user(session, ada.email)
    _grade(session, world, user, 6.0)
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    column = next(iter(course.line_items.values()))
    assert column.received[-1]["scoreMaximum"] == world.lab.max_score
    # No grading in between: the item alone moves the maximum, and the score goes again.
    item = add_item(session, lab=world.lab, title="Report", max_points=5)
    session.commit()
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert column.received[-1]["scoreMaximum"] == world.lab.max_score + 5
    update_item(session, lab=world.lab, item_id=item.id, max_points=7.5)
    session.commit()
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert column.received[-1]["scoreMaximum"] == world.lab.max_score + 7.5
    # A title alone leaves the maximum: nothing to send.
    update_item(session, lab=world.lab, item_id=item.id, title="Written report")
    session.commit()
    assert send_due_scores(course_id=world.course.id).sent == []
    remove_item(session, lab=world.lab, item_id=item.id)
    session.commit()
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert column.received[-1]["scoreMaximum"] == world.lab.max_score
    assert column.grades == {ada.sub: 6.0}


def test_rubric_points_are_sent_only_once_the_grades_are_released(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    world.lab.due_at = utcnow() + timedelta(days=2)  # released at the due date: not yet
    session.commit()
    user = _user(session, ada.email)
    _rubric(session, world, user, 3.0)
    _grade(session, world, user, 6.0)
    assert send_due_scores(course_id=world.course.id).sent
    item = next(iter(course.line_items.values()))
    assert item.grades == {ada.sub: 6.0}
    # Released: the next grading's score carries the rubric points.
    world.lab.grades_released_at = utcnow() - timedelta(minutes=1)
    session.commit()
    _grade(session, world, user, 6.0)
    assert send_due_scores(course_id=world.course.id).sent
    assert item.grades == {ada.sub: 9.0}


def test_a_score_changed_while_the_last_one_is_sent_goes_next(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    user = _user(session, ada.email)
    _grade(session, world, user, 5.0)

    lab_id, user_id = world.lab.id, user.id

    def better_grading_meanwhile(score: dict) -> None:
        # While the LMS takes 5, a regrade counts 9 in kernelgrader (the worker's own commit).
        lms.on_score = None
        with session_scope() as other:
            made, _ = make_submission(
                other, user=other.get_one(User, user_id), lab=other.get_one(Lab, lab_id), score=9.0
            )
            note_grading(other, submission=made)

    lms.on_score = better_grading_meanwhile
    first = send_due_scores(course_id=world.course.id)
    assert len(first.sent) == 1
    item = next(iter(course.line_items.values()))
    assert item.grades == {ada.sub: 5.0}
    session.expire_all()
    row = session.scalar(select(LtiScoreSync).where(LtiScoreSync.user_id == user.id))
    assert row is not None
    assert (row.state, row.score, row.sent_score) == (SyncState.pending.value, 9.0, 5.0)
    # The next pass sends the newer score; then nothing is left to send.
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert item.grades == {ada.sub: 9.0}
    assert not send_due_scores(course_id=world.course.id)
    session.expire_all()
    row = session.get_one(LtiScoreSync, row.id)
    assert (row.state, row.sent_score) == (SyncState.sent.value, 9.0)
