"""Deep linking, the roster (NRPS) and grades (AGS) against the platform, and the Canvas cases:
scores while the course is unpublished, Canvas's own late penalty, duplicate grade columns on
relaunch or a second link, and one person with two ways in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Enrollment, Role
from app.lti.grades import send_due_scores
from app.lti.models import LtiLineItem, LtiScoreSync, SyncState
from app.lti.roster import sync_wanted_rosters
from app.lti.scores import note_grading
from app.lti.service import overview
from app.users.models import User, UserIdentity
from tests.app.conftest import World
from tests.app.factories import make_submission
from tests.app.lti.conftest import Browser, link_course, log_in, register, registered_and_linked
from tests.app.lti.platform import INSTRUCTOR, TA, Course, Person, TestPlatform, form_of


def _deep_link(
    browser: Browser,
    lms: TestPlatform,
    teacher: Person,
    course: Course,
    lab: str,
    *,
    at: str = "",
) -> None:
    """The instructor adds a link in the LMS, picking the lab in kernelgrader (`at`: the
    deep-linking page, where the launch went through linking first)."""
    if not at:
        landed = browser.launch(lms, teacher, deep_link_in=course)
        assert landed.location.startswith("/lti/deep-link/"), landed.response.text[:2000]
        at = landed.location
    page = browser.page(at)
    assert lab in page
    chosen = browser.http.post(
        browser.tool + at,
        data={"lab": lab, "csrf_token": browser.csrf(at)},
    )
    assert chosen.status_code == 200, chosen.text[:2000]
    action, fields = form_of(chosen.text)
    assert action == f"{lms.base}/deep-link-return/{course.id}"
    placed = browser.http.post(action, data=fields)  # the platform checks it with our key set
    assert placed.status_code == 200, placed.text


def _grade(session: Session, world: World, user: User, score: float, **kwargs: object) -> None:
    submission, _ = make_submission(session, user=user, lab=world.lab, score=score, **kwargs)  # type: ignore[arg-type]
    note_grading(session, submission=submission)
    session.commit()


def _log_in_once(browser: Browser, email: str, then: str) -> None:
    """The page a launch went on to asks for a login first; the person logs in."""
    login = browser.get(then)
    assert login.status_code == 303 and login.headers["location"].startswith("/login")
    log_in(browser, email, then=then)


def _user(session: Session, email: str) -> User:
    session.expire_all()
    user = session.scalar(select(User).where(User.email == email))
    assert user is not None
    return user


def _setup(
    session: Session, world: World, lms: TestPlatform, browsers: object, *, published: bool = True
):  # type: ignore[no-untyped-def]
    """The LMS registered; its instructor links the LMS course (logging in as the world's
    instructor once) and places the lab through deep linking; a student launches it."""
    register(session, lms)
    teacher = lms.person("Grace", f"grace.{lms.client_id}@uni.example", role=INSTRUCTOR)
    ada = lms.person("Ada", f"ada.{lms.client_id}@uni.example")
    course = lms.course("GPU Programming", teacher, ada, published=published)
    browser = browsers()  # type: ignore[operator]
    at = link_course(browser, lms, teacher, course, world)
    _deep_link(browser, lms, teacher, course, world.lab.slug, at=at)
    student = browsers()  # type: ignore[operator]
    link = next(link for link in lms.links.values() if link.course_id == course.id)
    landed = student.launch(lms, ada, link=link)
    assert landed.location.endswith(f"/labs/{world.lab.slug}")
    return teacher, ada, course, link, student


def test_deep_linking_places_a_lab_and_its_one_grade_column(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    assert link.custom == {"lab": world.lab.slug}
    assert len(course.line_items) == 1
    item = next(iter(course.line_items.values()))
    assert (item.resource_id, item.score_maximum) == (world.lab.slug, world.lab.max_score)
    # The student's launch told the tool the column's URL; the score goes there.
    _grade(session, world, _user(session, ada.email), 7.0)
    report = send_due_scores(course_id=world.course.id)
    assert len(report.sent) == 1, report
    assert item.grades == {ada.sub: 7.0}
    assert item.received[-1]["gradingProgress"] == "FullyGraded"
    # An unchanged counted score is not sent again; a better one is.
    _grade(session, world, _user(session, ada.email), 5.0)
    assert not send_due_scores(course_id=world.course.id)
    _grade(session, world, _user(session, ada.email), 9.5)
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert item.grades == {ada.sub: 9.5}


def test_no_duplicate_columns_on_relaunch_a_second_link_or_a_second_course(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    # Relaunch, and a second link to the same lab placed through deep linking.
    student.launch(lms, ada, link=link)
    _deep_link(browsers(), lms, teacher, course, world.lab.slug)  # type: ignore[operator]
    assert lms.deep_link_results[-1][0].get("lineItem") is None  # no second column asked for
    second = [x for x in lms.links.values() if x.course_id == course.id and x.id != link.id][0]
    student.launch(lms, ada, link=second)
    # A link made by hand (custom lab=...) in the same LMS course: the tool finds the column.
    by_hand = lms.link(course, "Scale again", {"lab": world.lab.slug})
    student.launch(lms, ada, link=by_hand)
    _grade(session, world, _user(session, ada.email), 6.0)
    assert len(send_due_scores(course_id=world.course.id).sent) == 1
    assert len(course.line_items) == 1
    assert next(iter(course.line_items.values())).grades == {ada.sub: 6.0}
    session.expire_all()
    assert (
        len(session.scalars(select(LtiLineItem).where(LtiLineItem.lab_id == world.lab.id)).all())
        == 1
    )

    # A second LMS course linked to the same kernelgrader course (by its instructor, as the
    # first) gets its own one column, made by the tool through the line items service (no
    # deep linking there).
    other = lms.course("GPU Programming, section 2", ada)
    link_course(browsers(), lms, teacher, other, world)  # type: ignore[operator]
    hand = lms.link(other, "Scale", {"lab": world.lab.slug})
    student.launch(lms, ada, link=hand)
    student.launch(lms, ada, link=hand)
    _grade(session, world, _user(session, ada.email), 8.0)
    report = send_due_scores(course_id=world.course.id)
    assert len(report.sent) == 2 and len(report.columns_made) == 1, report
    assert len(other.line_items) == 1 and len(course.line_items) == 1
    assert next(iter(other.line_items.values())).grades == {ada.sub: 8.0}
    _grade(session, world, _user(session, ada.email), 9.0)
    send_due_scores(course_id=world.course.id)
    assert len(other.line_items) == 1  # found again by the URL kept, never made twice


def test_grades_refused_while_the_course_is_unpublished_are_shown_and_sent_later(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers, published=False)
    _grade(session, world, _user(session, ada.email), 7.0)
    report = send_due_scores(course_id=world.course.id)
    assert report.refused and not report.sent
    session.expire_all()
    row = session.scalar(
        select(LtiScoreSync).where(LtiScoreSync.user_id == _user(session, ada.email).id)
    )
    assert row is not None and row.state == SyncState.refused.value
    # The status line only: what else the LMS answered is shown to nobody.
    assert row.error == "HTTP 422 Unprocessable Entity"
    assert row.next_attempt_at > utcnow() + timedelta(seconds=30)
    # The course's LMS page counts the column's scores by state.
    (column,) = overview(session, course=world.course)["columns"]
    assert column.counts == {SyncState.refused.value: 1}
    # The staff read the LMS's answer on the course's LMS page, as its status line.
    staff = browsers()  # type: ignore[operator]
    staff.launch(lms, teacher, link=link)
    page = staff.page(f"/courses/{world.course.slug}/lti")
    assert "HTTP 422 Unprocessable Entity" in page and "Ada" in page
    assert "Course not available for student" not in page
    # Not retried before its time; then the course is published and the retry lands.
    assert not send_due_scores(course_id=world.course.id)
    course.published = True
    report = send_due_scores(now=utcnow() + timedelta(minutes=2), course_id=world.course.id)
    assert report.sent, report
    assert next(iter(course.line_items.values())).grades == {ada.sub: 7.0}
    session.expire_all()
    assert session.get_one(LtiScoreSync, row.id).state == SyncState.sent.value
    (column,) = overview(session, course=world.course)["columns"]
    assert column.counts == {SyncState.sent.value: 1}


def test_a_score_synced_after_the_due_date_keeps_its_on_time_submission_time(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    """Canvas docks a late score by the time it says the work was submitted, else by the
    time the score arrived: a score synced late (the course was unpublished, a regrade) of
    work handed in on time must not be docked."""
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    course.late_penalty = 0.5
    item = next(iter(course.line_items.values()))
    item.end = utcnow() - timedelta(hours=1)  # the due date passed an hour ago
    on_time = utcnow() - timedelta(hours=3)
    _grade(session, world, _user(session, ada.email), 8.0, created_at=on_time)
    assert send_due_scores(course_id=world.course.id).sent
    assert item.grades == {ada.sub: 8.0}
    assert item.received[-1]["submission"]["submittedAt"].startswith(
        on_time.strftime("%Y-%m-%dT%H:%M")
    )
    # Work handed in after the due date is late in Canvas too.
    _grade(session, world, _user(session, ada.email), 10.0)
    assert send_due_scores(course_id=world.course.id).sent
    assert item.grades == {ada.sub: 5.0}


def test_the_roster_comes_from_the_lms_page_by_page(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    bob = lms.person("Bob", "bob.nrps@uni.example")
    tom = lms.person("Tom", "tom.nrps@uni.example", role=TA)
    gone = lms.person("Gone", "gone.nrps@uni.example")
    gone.status = "Inactive"
    course.members += [bob.sub, tom.sub, gone.sub]
    results = sync_wanted_rosters(course_id=world.course.id)
    assert len(results) == 1
    assert "2 students and 2 staff enrolled from the LMS (2 new accounts)" in results[0]
    assert "1 inactive in the LMS were left as they were" in results[0]
    session.expire_all()
    roles = dict(
        session.execute(
            select(User.email, Enrollment.role)
            .join(Enrollment, Enrollment.user_id == User.id)
            .where(Enrollment.course_id == world.course.id)
        ).all()
    )
    assert roles["bob.nrps@uni.example"] == Role.student.value
    assert roles["tom.nrps@uni.example"] == Role.ta.value
    assert "gone.nrps@uni.example" not in roles
    assert not sync_wanted_rosters(
        course_id=world.course.id
    )  # done until the next launch asks again
    # Staff can ask for it at once, from the course's LMS page.
    staff = browsers()  # type: ignore[operator]
    staff.launch(lms, teacher, link=link)
    path = f"/courses/{world.course.slug}/lti"
    answer = staff.http.post(staff.tool + path + "/roster", data={"csrf_token": staff.csrf(path)})
    assert answer.status_code == 303
    assert "students and 2 staff enrolled from the LMS" in staff.page(answer.headers["location"])


@pytest.mark.parametrize("who", ["student", "outsider"])
def test_an_account_is_joined_to_its_lms_sign_in_only_by_its_owners_login(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object, who: str
) -> None:
    """The LMS sends the email of a password account (enrolled in the course by the roster
    import, or in no course): the LMS alone opens nothing; its owner logs in once and joins
    the two, and from then on there is one account, one gradebook row."""
    owner = getattr(world, who).user
    person = lms.person("Someone", owner.email)
    course = lms.course("GPU", person)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    browser = browsers()  # type: ignore[operator]
    landed = browser.launch(lms, person, link=link)
    assert landed.location.startswith("/lti/continue/")
    assert browser.get("/account").status_code == 303  # nobody was logged in by it
    _log_in_once(browser, owner.email, landed.location)
    assert "Join your LMS sign-in" in browser.page(landed.location)
    joined = browser.http.post(
        browser.tool + landed.location, data={"csrf_token": browser.csrf(landed.location)}
    )
    assert joined.headers["location"].endswith(f"/labs/{world.lab.slug}")
    again = browsers().launch(lms, person, link=link)  # type: ignore[operator]
    assert again.location.endswith(f"/labs/{world.lab.slug}")  # straight in now
    session.expire_all()
    assert session.scalars(select(User.id).where(User.email == owner.email)).all() == [owner.id]
    # The LMS sign-in is the owner's, and no account of its own (a placeholder) was made for
    # it: its subject is held by the owner's account alone. (Other tests' placeholder
    # accounts are theirs: the database is shared.)
    held = session.scalars(select(UserIdentity.user_id).where(UserIdentity.subject == person.sub))
    assert held.all() == [owner.id]
    assert (
        session.scalar(
            select(Enrollment.role).where(
                Enrollment.user_id == owner.id, Enrollment.course_id == world.course.id
            )
        )
        == Role.student.value
    )


def test_an_instructor_links_a_new_lms_course_to_a_new_course(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    register(session, lms)
    teacher = lms.person("Grace", world.instructor.email, role=INSTRUCTOR)
    ada = lms.person("Ada", "ada.new@uni.example")
    course = lms.course("Parallel Computing 2027", teacher, ada)
    link = lms.link(course, "kernelgrader")
    refused = browsers().launch(lms, ada, link=link)  # type: ignore[operator]
    assert refused.response.status_code == 400
    assert "not connected to a kernelgrader course yet" in refused.response.text
    browser = browsers()  # type: ignore[operator]
    landed = browser.launch(lms, teacher, link=link)
    assert landed.location.startswith("/lti/continue/")
    # The LMS's instructor proves with their own login which courses they teach here.
    _log_in_once(browser, world.instructor.email, landed.location)
    page = browser.page(landed.location)
    assert "Link this LMS course" in page and world.course.slug in page
    done = browser.http.post(
        browser.tool + landed.location,
        data={"course": "new", "csrf_token": browser.csrf(landed.location)},
    )
    assert done.headers["location"] == "/courses/parallel-computing-2027"
    again = browsers().launch(lms, ada, link=link)  # type: ignore[operator]
    assert again.location == "/courses/parallel-computing-2027"


def test_a_worker_recording_a_grading_queues_the_score_for_the_lms(
    session: Session, world: World, lms: TestPlatform, browsers: object
) -> None:
    """The worker's own path (record_report) notes the changed counted score."""
    from tests.app.factories import make_timed_submission

    teacher, ada, course, link, student = _setup(session, world, lms, browsers)
    user = _user(session, ada.email)
    graded = make_timed_submission(session, user=user, lab=world.lab, median_ms=1.0)
    session.commit()
    session.expire_all()
    row = session.scalar(select(LtiScoreSync).where(LtiScoreSync.user_id == user.id))
    assert row is not None and row.state == SyncState.pending.value
    assert row.score == graded.score and row.max_score == world.lab.max_score
    assert send_due_scores(course_id=world.course.id).sent
    assert next(iter(course.line_items.values())).grades == {ada.sub: graded.score}
