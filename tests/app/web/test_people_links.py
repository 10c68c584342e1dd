"""A course's staff get no credential for an account that someone uses (issue 31, class 1).

Against the service on loopback (uvicorn in a thread) and, where mail is on, a real SMTP
server: an instructor of one course adds a TA of another course to their own course and asks
for a set-password link, by each way the People page offers (adding, inviting, a roster). The
page shows no link, the TA's password still works, and where mail is on the link goes only to
the TA's own mailbox. A link shown for an account made just now stops working once another
course enrols it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.mail import outbox
from app.courses.models import Role
from app.courses.service import role_in
from app.users.models import Invite
from app.users.service import find_user
from tests.app.conftest import PASSWORD, Member, World, make_world, unique
from tests.app.lti.conftest import Browser, browsers, tool  # noqa: F401
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401

LINK = re.compile(r"/invite/[\w-]{20,}")


@pytest.fixture
def two_courses(session: Session) -> Iterator[tuple[World, World]]:
    """The victim's course (A) and the attacker's (B), strangers to each other."""
    yield make_world(session), make_world(session)


def logged_in(make: object, member: Member) -> Browser:
    """A new browser (from the `browsers` fixture) logged in as the member."""
    made: Browser = make()  # type: ignore[operator]
    answer = made.http.post(
        made.tool + "/login",
        data={"email": member.email, "password": PASSWORD, "csrf_token": made.csrf("/login")},
    )
    assert answer.status_code == 303, answer.text[:2000]
    return made


def post(browser: Browser, world: World, action: str, data: dict[str, str]) -> httpx.Response:
    people = f"/courses/{world.course.slug}/people"
    token = browser.csrf(people)
    return browser.http.post(f"{browser.tool}{people}{action}", data={**data, "csrf_token": token})


def roster(browser: Browser, world: World, text: str) -> httpx.Response:
    people = f"/courses/{world.course.slug}/people"
    preview = browser.http.post(
        f"{browser.tool}{people}/roster",
        data={"csrf_token": browser.csrf(people)},
        files={"file": ("roster.csv", text.encode(), "text/csv")},
    )
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', preview.text)
    assert digest, preview.text[:2000]
    return post(
        browser,
        world,
        "/roster/apply",
        {"roster": text, "digest": digest.group(1), "invite": "true"},
    )


def live_links(session: Session, member: Member) -> list[Invite]:
    session.expire_all()
    return list(
        session.scalars(
            select(Invite).where(Invite.user_id == member.user.id, Invite.used_at.is_(None))
        )
    )


def test_an_instructor_of_another_course_gets_no_link_for_an_account_in_use(
    session: Session,
    two_courses: tuple[World, World],
    browsers: object,  # noqa: F811
) -> None:
    victim_course, attacker_course = two_courses
    victim = victim_course.ta
    attacker = logged_in(browsers, attacker_course.instructor)
    added = post(
        attacker, attacker_course, "/add", {"email": victim.email, "role": "ta", "invite": "true"}
    )
    assert added.status_code == 200, added.text[:2000]
    assert not LINK.search(added.text)
    assert f"{victim.email} already has an account in use, so no link was made" in added.text
    assert "They log in with their own password" in added.text
    invited = post(attacker, attacker_course, "/invite", {"email": victim.email})
    assert invited.status_code == 200 and not LINK.search(invited.text)
    # Removed and added again through a roster: still no link.
    post(attacker, attacker_course, "/remove", {"email": victim.email})
    applied = roster(attacker, attacker_course, f"email,name,role\n{victim.email},,ta\n")
    assert applied.status_code == 200 and not LINK.search(applied.text)
    assert "already has an account in use" in applied.text
    assert live_links(session, victim) == []
    # The enrolment itself stands (the course's own business); the account is the TA's still.
    assert role_in(session, user=victim.user, course=attacker_course.course) is Role.ta
    owner = logged_in(browsers, victim)
    assert victim.email in owner.page("/account")


def test_with_mail_the_link_goes_to_the_owners_mailbox_only(
    session: Session,
    two_courses: tuple[World, World],
    browsers: object,  # noqa: F811
    mail_server: Inbox,  # noqa: F811
) -> None:
    victim_course, attacker_course = two_courses
    victim = victim_course.ta
    attacker = logged_in(browsers, attacker_course.instructor)
    added = attacker.http.post(
        f"{attacker.tool}/courses/{attacker_course.course.slug}/people/add",
        data={
            "email": victim.email,
            "invite": "true",
            "csrf_token": attacker.csrf(f"/courses/{attacker_course.course.slug}/people"),
        },
        follow_redirects=True,
    )
    assert added.status_code == 200 and not LINK.search(added.text)
    outbox.wait_until_sent()
    (mail,) = mail_server.to(victim.email)
    assert "Log in as you do now" in body_of(mail) and LINK.search(body_of(mail))
    assert mail_server.to(attacker_course.instructor.email) == []
    # Until the owner uses it, their own password works as before.
    assert victim.email in logged_in(browsers, victim).page("/account")


def test_a_link_shown_for_a_new_account_stops_once_another_course_enrols_it(
    session: Session,
    two_courses: tuple[World, World],
    browsers: object,  # noqa: F811
) -> None:
    first, second = two_courses
    email = f"{unique('newcomer')}@uni.edu"
    staff = logged_in(browsers, first.instructor)
    added = post(staff, first, "/add", {"email": email, "invite": "true"})
    shown = LINK.search(added.text)
    assert added.status_code == 200 and shown, added.text[:2000]
    assert added.headers["cache-control"] == "no-store"
    assert staff.get(shown.group(0)).status_code == 200
    # The other course's staff add the same person: they get no link, and the first one dies.
    other = logged_in(browsers, second.instructor)
    again = post(other, second, "/add", {"email": email, "invite": "true"})
    assert again.status_code == 200 and not LINK.search(again.text)
    assert "another course enrols them too" in again.text
    dead = staff.get(shown.group(0))
    assert dead.status_code == 404 and "has been used since" in dead.text
    session.expire_all()
    person = find_user(session, email=email)
    assert person is not None and person.password_hash is None
