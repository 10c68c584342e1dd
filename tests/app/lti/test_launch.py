"""Login and resource-link launch, end to end against a platform built on lti1p3platform."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Enrollment, Role
from app.lti.models import LtiContext, LtiResourceLink
from app.users.models import User, UserIdentity
from tests.app.conftest import World, unique
from tests.app.lti.conftest import Browser, registered_and_linked
from tests.app.lti.platform import INSTRUCTOR, TA, TestPlatform


def test_a_student_launches_straight_into_a_lab(
    session: Session, world: World, tool: str, lms: TestPlatform, browser: Browser
) -> None:
    ada = lms.person("Ada Lovelace", f"{unique('ada')}@uni.example")
    course = lms.course("GPU Programming", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale lab", {"lab": world.lab.slug})

    landed = browser.launch(lms, ada, link=link)

    assert landed.response.status_code == 303, landed.response.text[:2000]
    assert landed.location == f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    page = browser.page(landed.location)
    assert world.lab.title in page
    assert ada.email in page  # logged in: the header names the account
    session.expire_all()
    user = session.scalar(select(User).where(User.email == ada.email))
    assert user is not None and user.name == "Ada Lovelace"
    role = session.scalar(
        select(Enrollment.role).where(
            Enrollment.user_id == user.id, Enrollment.course_id == world.course.id
        )
    )
    assert role == Role.student.value
    identity = session.scalar(select(UserIdentity).where(UserIdentity.user_id == user.id))
    assert identity is not None and (identity.issuer, identity.subject) == (lms.issuer, ada.sub)
    assert identity.platform_id is not None
    context = session.scalar(select(LtiContext).where(LtiContext.context_id == course.id))
    assert context is not None and context.course_id == world.course.id
    assert context.memberships_url.endswith(f"/nrps/{course.id}")
    assert context.roster_wanted_at is not None  # a worker reads the roster next
    stored = session.scalar(
        select(LtiResourceLink).where(LtiResourceLink.resource_link_id == link.id)
    )
    assert stored is not None and stored.lab_id == world.lab.id


def test_a_link_without_a_lab_opens_the_course_and_roles_come_from_the_lms(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    grace = lms.person("Grace Hopper", f"{unique('grace')}@uni.example", role=INSTRUCTOR)
    alan = lms.person("Alan Turing", f"{unique('alan')}@uni.example", role=TA)
    course = lms.course("GPU Programming", grace, alan)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "kernelgrader")

    for person, role in ((grace, Role.instructor), (alan, Role.ta)):
        landed = browsers().launch(lms, person, link=link)  # type: ignore[operator]
        assert landed.location == f"/courses/{world.course.slug}"
        session.expire_all()
        user = session.scalar(select(User).where(User.email == person.email))
        assert user is not None
        assert (
            session.scalar(
                select(Enrollment.role).where(
                    Enrollment.user_id == user.id, Enrollment.course_id == world.course.id
                )
            )
            == role.value
        )


def test_relaunching_matches_the_same_account_even_when_the_lms_email_changes(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    ada = lms.person("Ada", f"{unique('ada')}@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    browsers().launch(lms, ada, link=link)  # type: ignore[operator]
    renamed = f"{unique('ada')}@uni.example"
    ada.email = renamed
    landed = browsers().launch(lms, ada, link=link)  # type: ignore[operator]
    assert landed.response.status_code == 303
    session.expire_all()
    ids = session.scalars(select(UserIdentity.user_id).where(UserIdentity.subject == ada.sub)).all()
    assert len(ids) == 1
    assert session.scalar(select(User).where(User.email == renamed)) is None
