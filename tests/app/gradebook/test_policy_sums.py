"""What the gradebook adds up from the course's policies: late days left after the staff's
adjustments and what was spent, rubric points per lab and per student, each lab's rubric total.

Written against the survivors of scripts/mutation.py (app/gradebook/service.py).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.service import add_lab
from app.latedays.models import LateDayCharge, LateDayEvent
from app.latedays.service import late_days_left
from app.policy.counting import policy_inputs
from app.rubric.models import RubricItem, RubricScore
from app.rubric.service import points_possible
from tests.app.conftest import World, make_world


def _event(world: World, user_id: int, kind: str, delta: int) -> LateDayEvent:
    return LateDayEvent(
        course_id=world.course.id, user_id=user_id, kind=kind, delta=delta, remaining_after=0
    )


def test_late_days_left_are_the_budget_plus_adjustments_less_what_was_spent(
    session: Session, world: World
) -> None:
    world.course.late_days = 3
    ada, bob, ta = world.student.user.id, world.other_student.user.id, world.ta.user.id
    elsewhere = make_world(session)
    session.add_all(
        [
            _event(world, ada, "adjust", 2),
            _event(world, ada, "adjust", 1),
            _event(world, bob, "adjust", -1),
            _event(world, ta, "adjust", 1),  # adjusted, never spent
            _event(world, ada, "spend", -1),  # a spend is counted from the charges
            _event(elsewhere, ada, "adjust", 10),  # another course's
            LateDayCharge(course_id=world.course.id, lab_id=world.lab.id, user_id=ada, days=2),
            LateDayCharge(course_id=world.course.id, lab_id=world.lab.id, user_id=bob, days=1),
            LateDayCharge(
                course_id=elsewhere.course.id, lab_id=elsewhere.lab.id, user_id=bob, days=5
            ),
        ]
    )
    session.flush()
    assert late_days_left(session, course=world.course) == {
        ada: 3 + 3 - 2,
        bob: 3 - 1 - 1,
        ta: 3 + 1,
    }


def test_rubric_points_are_summed_per_lab_and_student(session: Session, world: World) -> None:
    second = add_lab(session, course=world.course, ref="hadamard")
    ada, bob = world.student.user.id, world.other_student.user.id
    items = {}
    for lab, points in ((world.lab, (2.0, 3.0)), (second, (4.0,))):
        for position, most in enumerate(points):
            item = RubricItem(lab_id=lab.id, position=position, title="t", max_points=most)
            session.add(item)
            session.flush()
            items[(lab.id, position)] = item
    scores = [
        (world.lab.id, 0, ada, 1.5),
        (world.lab.id, 1, ada, 3.0),
        (second.id, 0, ada, 4.0),
        (world.lab.id, 0, bob, 2.0),
    ]
    for lab_id, position, user, points in scores:
        item = items[(lab_id, position)]
        session.add(RubricScore(item_id=item.id, lab_id=lab_id, user_id=user, points=points))
    session.flush()
    labs = [world.lab, second]
    inputs = policy_inputs(session, labs=labs)
    assert inputs.rubric == {
        (world.lab.id, ada): 4.5,
        (second.id, ada): 4.0,
        (world.lab.id, bob): 2.0,
    }
    assert policy_inputs(session, labs=labs, rubric=False).rubric == {}
    mine = policy_inputs(session, labs=labs, user_id=bob)
    assert mine.rubric == {(world.lab.id, bob): 2.0}
    third = add_lab(session, course=world.course, ref="array-sum")
    # The one maximum: the autograde's points plus the rubric items'.
    assert points_possible(session, labs=[*labs, third]) == {
        world.lab.id: world.lab.max_score + 5.0,
        second.id: second.max_score + 4.0,
        third.id: third.max_score,
    }
    assert points_possible(session, labs=[]) == {}


def test_a_students_cells_hold_their_own_submissions_extension_and_rubric(
    session: Session, world: World
) -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from app.policy.counting import best_scores, student_cell
    from app.policy.rules import grant_extension
    from tests.app.factories import make_submission

    due = utcnow() - timedelta(days=2)
    world.lab.due_at = due
    ada, bob = world.student.user, world.other_student.user
    make_submission(session, user=bob, lab=world.lab, score=9.0, created_at=due)
    make_submission(
        session, user=ada, lab=world.lab, score=4.0, created_at=due + timedelta(hours=1), late=True
    )
    item = RubricItem(lab_id=world.lab.id, position=0, title="style", max_points=2.0)
    session.add(item)
    session.flush()
    session.add(RubricScore(item_id=item.id, lab_id=world.lab.id, user_id=ada.id, points=1.5))
    session.add(RubricScore(item_id=item.id, lab_id=world.lab.id, user_id=bob.id, points=0.5))
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=ada,
        due_at=due + timedelta(days=1),
        granted_by=None,
    )
    session.flush()
    cell = student_cell(session, lab=world.lab, user_id=ada.id)
    assert cell.counted is not None and cell.counted.score == 4.0
    assert cell.late is False  # within the extension
    assert (cell.rubric, cell.score) == (1.5, 5.5)
    hidden = student_cell(session, lab=world.lab, user_id=ada.id, rubric=False)
    assert (hidden.rubric, hidden.score) == (None, 4.0)
    assert best_scores(session, user=ada, labs=[world.lab])[world.lab.id].rubric == 1.5
    assert (
        best_scores(session, user=ada, labs=[world.lab], rubric=set())[world.lab.id].rubric is None
    )
    assert best_scores(session, user=ada, labs=[]) == {}


def test_a_team_submission_is_late_by_each_members_own_due_date_and_late_days(
    session: Session, world: World
) -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from app.gradebook.lab_roster import lab_roster
    from app.grading.record import record_report
    from app.policy.counting import student_cell
    from app.policy.rules import grant_extension
    from app.submissions.service import create_submission
    from graders.results import GradeReport

    due = utcnow() - timedelta(days=3)
    world.lab.due_at, world.lab.team_size = due, 2
    ada, bob = world.student.user, world.other_student.user
    world.pair_up(session, now=due - timedelta(days=1))
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=bob,
        due_at=due + timedelta(days=1),
        granted_by=None,
    )
    intake = create_submission(
        session,
        user=ada,
        course=world.course,
        lab=world.lab,
        filename="k.cu",
        data=b"__global__ void k() {}\n",
        now=due + timedelta(hours=2),
    )
    sub = intake.submission
    report = GradeReport(lab=world.lab.slug, cases=[], score=5.0, max_score=10, summary="graded")
    record_report(session, submission=sub, job=intake.job, report=report)
    session.flush()
    assert sub.late
    theirs = student_cell(session, lab=world.lab, user_id=bob.id)
    assert theirs.counted is not None and not theirs.late and theirs.days_late == 0
    mine = student_cell(session, lab=world.lab, user_id=ada.id)
    assert mine.late and mine.days_late == 1 and mine.late_days == 0  # the course gives none
    rows = {r.student.id: r for r in lab_roster(session, lab=world.lab)}
    assert rows[ada.id].late and not rows[bob.id].late
    # With a late day to spend, the grading recorded again (as a regrade would) spends it on
    # Ada's lateness: covered, no longer late. Bob, on time by his extension, spends none.
    world.course.late_days = 1
    record_report(session, submission=sub, job=intake.job, report=report)
    session.flush()
    covered = student_cell(session, lab=world.lab, user_id=ada.id)
    assert (covered.late, covered.late_days, covered.days_late) == (False, 1, 1)
    spent = session.scalars(
        select(LateDayCharge.user_id).where(
            LateDayCharge.lab_id == world.lab.id, LateDayCharge.days > 0
        )
    ).all()
    assert spent == [ada.id]
