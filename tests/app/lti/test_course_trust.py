"""What an LMS can do in a course: only through an LMS course that course's instructor linked,
only with the roles of that LMS course, never leaving the course without an instructor.

Attacks by a student who teaches elsewhere in the LMS, and by an LMS instructor against a
kernelgrader instructor's browser, through the real service and platform (issue 31, classes
5 and 18).
"""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Enrollment, Role
from app.lti.models import LtiContext
from app.lti.roster import sync_wanted_rosters
from app.users.models import User
from tests.app.conftest import World, unique
from tests.app.lti.conftest import (
    Browser,
    link_course,
    log_in,
    register,
    registered_and_linked,
)
from tests.app.lti.platform import INSTRUCTOR, LEARNER, TA, TestPlatform

INSTITUTION_INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"
SYSTEM_ADMIN = "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator"


def _role(session: Session, email: str, world: World) -> str | None:
    session.expire_all()
    return session.scalar(
        select(Enrollment.role)
        .join(User, User.id == Enrollment.user_id)
        .where(User.email == email, Enrollment.course_id == world.course.id)
    )


def test_teaching_another_lms_course_gives_a_student_nothing_here(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Class 5: Eve is a learner in CS101, which is linked to the course, and the instructor
    of her own sandbox in the same LMS. Her launch from the sandbox links nothing by itself,
    and logged in as herself she cannot link it to a course she does not teach."""
    eve = lms.person("Eve", world.student.email)
    cs101 = lms.course("CS101", eve)
    registered_and_linked(session, world, lms, cs101, tool)
    sandbox = lms.course("Eve's sandbox", eve)
    sandbox.roles[eve.sub] = INSTRUCTOR

    browser: Browser = browsers()  # type: ignore[operator]
    landed = browser.launch(lms, eve, link=lms.link(sandbox, "kernelgrader"))
    assert landed.location.startswith("/lti/continue/"), landed.location
    assert browser.get("/account").status_code == 303  # the LMS logged nobody in
    assert _role(session, world.student.email, world) == Role.student.value
    log_in(browser, world.student.email, then=landed.location)
    page = browser.page(landed.location)
    assert f'value="{world.course.slug}"' not in page  # only courses she teaches are offered
    refused = browser.http.post(
        tool + landed.location,
        data={"course": world.course.slug, "csrf_token": browser.csrf(landed.location)},
    )
    assert refused.status_code == 403
    assert f"Only an instructor of {world.course.slug}" in refused.text
    assert _role(session, world.student.email, world) == Role.student.value
    session.expire_all()
    linked = session.scalar(select(LtiContext.course_id).where(LtiContext.context_id == sandbox.id))
    assert linked is None


def test_a_learner_launch_never_demotes_the_last_instructor(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Class 5: the course's only instructor is a learner in a second LMS course that is
    linked to it too (a lab section); their launch from it leaves them its instructor."""
    grace = lms.person("Grace", world.instructor.email, role=INSTRUCTOR)
    cs101 = lms.course("CS101", grace)
    register(session, lms)
    link_course(browsers(), lms, grace, cs101, world)  # type: ignore[operator]
    section = lms.course("CS101 lab section", grace)
    section.roles[grace.sub] = LEARNER
    # The section's own instructor (the same kernelgrader instructor, another LMS user)
    # links it.
    hopper = lms.person("Hopper", f"{unique('hopper')}@uni.example", role=INSTRUCTOR)
    link_course(browsers(), lms, hopper, section, world)  # type: ignore[operator]
    session.expire_all()
    assert (
        session.scalar(select(LtiContext.course_id).where(LtiContext.context_id == section.id))
        == world.course.id
    )

    landed = browsers().launch(lms, grace, link=lms.link(section, "kernelgrader"))  # type: ignore[operator]
    assert landed.response.status_code == 303 and landed.location == f"/courses/{world.course.slug}"
    assert _role(session, world.instructor.email, world) == Role.instructor.value
    # The roster's Learner role does not demote them either.
    section.members = [grace.sub]
    sync_wanted_rosters(course_id=world.course.id)
    assert _role(session, world.instructor.email, world) == Role.instructor.value


def test_a_link_started_in_one_browser_cannot_be_finished_in_another(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """An LMS instructor of a sandbox starts linking it, then sends the page's address to
    the course's instructor: in their browser it finds nothing, so neither the sandbox nor
    the attacker's LMS sign-in lands in their course or account."""
    cs101 = lms.course("CS101")
    teacher = registered_and_linked(session, world, lms, cs101, tool)  # the world's instructor
    mallory = lms.person("Mallory", f"{unique('mallory')}@evil.example", role=INSTRUCTOR)
    sandbox = lms.course("Mallory's sandbox", mallory)
    attacker: Browser = browsers()  # type: ignore[operator]
    landed = attacker.launch(lms, mallory, deep_link_in=sandbox)
    assert landed.location.startswith("/lti/continue/")

    # The victim came in from the LMS too (so their browser has a launch cookie of its own).
    victim: Browser = browsers()  # type: ignore[operator]
    came = victim.launch(lms, teacher, link=lms.link(cs101, "kernelgrader"))
    assert came.location == f"/courses/{world.course.slug}"
    assert world.instructor.email in victim.page("/account")
    assert victim.get(landed.location).status_code == 404
    posted = victim.http.post(
        tool + landed.location,
        data={"course": world.course.slug, "csrf_token": victim.csrf("/account")},
    )
    assert posted.status_code == 404
    session.expire_all()
    assert session.scalar(select(LtiContext.id).where(LtiContext.context_id == sandbox.id)) is None
    relaunch = browsers().launch(lms, mallory, deep_link_in=sandbox)  # type: ignore[operator]
    assert relaunch.location.startswith("/lti/continue/")  # still nobody's


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        # Canvas: a learner here who teaches anywhere in the account.
        ([LEARNER, INSTITUTION_INSTRUCTOR], Role.student),
        ([SYSTEM_ADMIN, LEARNER], Role.student),
        ([INSTITUTION_INSTRUCTOR], None),  # no role in this LMS course at all
        ([TA], Role.ta),  # membership/Instructor#TeachingAssistant
        ([INSTRUCTOR, TA], Role.ta),  # a sub-role narrows its principal
        (["Learner"], Role.student),  # LTI's simple name of a context role
        ([INSTRUCTOR], Role.instructor),
    ],
)
def test_only_the_lms_courses_own_roles_count(
    session: Session,
    world: World,
    tool: str,
    lms: TestPlatform,
    browsers: object,
    roles: list[str],
    expected: Role | None,
) -> None:
    """Class 18: institution and system roles give nothing in a course; a TA's role URI,
    which names the instructor role it narrows, makes a TA."""
    person = lms.person("Pat", f"{unique('pat')}@uni.example", role=roles)
    course = lms.course("CS101", person)
    registered_and_linked(session, world, lms, course, tool)
    landed = browsers().launch(lms, person, link=lms.link(course, "kernelgrader"))  # type: ignore[operator]
    if expected is None:
        assert landed.response.status_code == 400
        assert "has no place in kernelgrader" in landed.response.text
    else:
        assert landed.response.status_code == 303, landed.response.text[:2000]
    assert _role(session, person.email, world) == (expected.value if expected else None)
    # The roster reads roles the same way.
    roster = lms.person("Quinn", f"{unique('quinn')}@uni.example", role=roles)
    course.members.append(roster.sub)
    sync_wanted_rosters(course_id=world.course.id)
    assert _role(session, roster.email, world) == (expected.value if expected else None)
