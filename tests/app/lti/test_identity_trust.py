"""Who an LMS can make someone: its own users only, never an account by its email, never
another registration's users, and nothing signed for it works at another registration's LMS.

Each test is an attack by a course's staff (or an LMS they control) against another course's
people, through the real service and LMS platforms on loopback (issue 31, classes 2, 3, 4).
"""

from __future__ import annotations

import httpx
import jwt
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Conflict
from app.courses.models import Role
from app.lti.registrations import RegistrationValues, create_registration
from app.people.service import add_member
from app.users.models import UserIdentity
from tests.app.conftest import World, make_member, make_world, unique
from tests.app.lti.conftest import Browser, link_course, log_in, register, registered_and_linked
from tests.app.lti.platform import INSTRUCTOR, NRPS_SCOPE, Person, TestPlatform


def _accounts_with(session: Session, sub: str) -> list[int]:
    session.expire_all()
    return list(session.scalars(select(UserIdentity.user_id).where(UserIdentity.subject == sub)))


def test_an_lms_email_never_opens_the_account_that_has_it(
    session: Session, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Class 2: the instructor of course B enrols the instructor of course A in B (as staff
    may), has their linked LMS course send a new user with A's instructor's email, and
    launches as that user: nobody is logged in, nothing joins the victim's account, and only
    the victim's own login could join it."""
    victim = make_world(session).instructor
    attackers = make_world(session)
    add_member(session, course=attackers.course, email=victim.email, name="", role=Role.student)
    session.commit()
    mallory = lms.person("Mallory", attackers.instructor.email, role=INSTRUCTOR)
    posing = lms.person("Not the victim", victim.email)  # a new sub with the victim's email
    course = lms.course("B in the LMS", mallory, posing)
    register(session, lms)
    link_course(browsers(), lms, mallory, course, attackers)  # type: ignore[operator]
    link = lms.link(course, "Scale", {"lab": attackers.lab.slug})

    browser: Browser = browsers()  # type: ignore[operator]
    landed = browser.launch(lms, posing, link=link)
    assert landed.response.status_code == 303
    assert landed.location.startswith("/lti/continue/"), landed.location
    # Logged in as nobody: the victim's pages (and the API tokens made there) are out of
    # reach, and the LMS user is joined to no account.
    assert browser.get("/account").status_code == 303
    assert browser.get(f"/courses/{attackers.course.slug}").status_code == 303
    assert _accounts_with(session, posing.sub) == []
    # The attacker, logged in as themselves, cannot join it to the victim's account either.
    log_in(browser, attackers.instructor.email, then=landed.location)
    assert f"Log in as {victim.email}" in browser.page(landed.location)
    refused = browser.http.post(
        tool + landed.location, data={"csrf_token": browser.csrf(landed.location)}
    )
    assert refused.status_code == 403
    assert _accounts_with(session, posing.sub) == []


def test_a_second_registration_never_reaches_the_first_ones_users(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Class 3: Ada came in through one registration. A second registration claiming the
    same issuer (its own client id and key set) is refused, so its launches go nowhere; and
    a registration of another LMS whose user has Ada's `sub` reaches a new person, not Ada."""
    ada = lms.person("Ada", f"{unique('ada')}@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    assert browsers().launch(lms, ada, link=link).response.status_code == 303  # type: ignore[operator]
    (ada_id,) = _accounts_with(session, ada.sub)

    admin = make_member(session, None, Role.student).user
    admin.is_site_admin = True
    session.commit()
    with TestPlatform(tool_base=tool, issuer=lms.issuer) as twin:
        page: Browser = browsers()  # type: ignore[operator]
        log_in(page, admin.email)
        answer = page.http.post(
            tool + "/admin/lti",
            data={**twin.values(), "slug": twin.slug, "csrf_token": page.csrf("/admin/lti")},
        )
        assert answer.status_code == 422 and f"owns the issuer {lms.issuer}" in answer.text
        try:
            create_registration(
                session, slug=twin.slug, values=RegistrationValues(**twin.values()), by=None
            )
            raise AssertionError("a second registration of one issuer was made")
        except Conflict:
            session.rollback()
        twin.people[ada.sub] = Person(sub=ada.sub, name="Mallory", email="mallory@evil.example")
        twin_course = twin.course("Mallory's", twin.people[ada.sub])
        refused = page.http.get(
            twin.login_initiation(twin.people[ada.sub], link=twin.link(twin_course, "x"))
        )
        assert refused.status_code == 400
        assert "This LMS is not registered with kernelgrader" in refused.text
    assert _accounts_with(session, ada.sub) == [ada_id]

    with TestPlatform(tool_base=tool) as other:
        same_sub = Person(sub=ada.sub, name="Someone else", email=f"{unique('else')}@x.example")
        other.people[ada.sub] = same_sub
        other_course = other.course("Elsewhere", same_sub)
        registered_and_linked(session, world, other, other_course, tool)
        browser: Browser = browsers()  # type: ignore[operator]
        landed = browser.launch(other, same_sub, link=other.link(other_course, "x"))
        assert landed.response.status_code == 303
        assert ada.email not in browser.page("/account")
    accounts = _accounts_with(session, ada.sub)
    assert len(accounts) == 2 and ada_id in accounts  # two people, one each


def test_an_assertion_signed_for_one_registration_buys_nothing_at_another_lms(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """Class 4: a registration made with the campus LMS's client id, the campus token URL as
    audience and a token URL of its own gets the tool to sign a client assertion. Sent on to
    the campus LMS, which checks it against the key set of the tool's campus registration,
    it is refused: each registration signs with its own key, listed at its own URL."""
    campus_teacher = lms.person("Grace", f"{unique('grace')}@uni.example", role=INSTRUCTOR)
    campus_course = lms.course("CS101", campus_teacher)
    registered_and_linked(session, world, lms, campus_course, tool)

    attackers = make_world(session)
    with TestPlatform(tool_base=tool) as evil:
        evil.client_id = lms.client_id
        evil.token_audience = lms.url("token")
        register(session, evil, auth_audience=lms.url("token"))
        mallory = evil.person("Mallory", attackers.instructor.email, role=INSTRUCTOR)
        evil_course = evil.course("Mallory's", mallory)
        staff: Browser = browsers()  # type: ignore[operator]
        link_course(staff, evil, mallory, evil_course, attackers)
        path = f"/courses/{attackers.course.slug}/lti"
        synced = staff.http.post(tool + path + "/roster", data={"csrf_token": staff.csrf(path)})
        assert synced.status_code == 303
        assert evil.assertions, "the tool asked the attacker's token URL for nothing"
        stolen = evil.assertions[-1]
    claims = jwt.decode(stolen, options={"verify_signature": False})
    assert (claims["iss"], claims["aud"]) == (lms.client_id, lms.url("token"))
    replayed = httpx.post(
        lms.url("token"),
        data={
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": stolen,
            "scope": NRPS_SCOPE,
        },
    )
    assert replayed.status_code == 400, replayed.text
    assert "access_token" not in replayed.text
    # The campus registration's own assertion is taken there: the check is a real one.
    teacher: Browser = browsers()  # type: ignore[operator]
    log_in(teacher, world.instructor.email)
    path = f"/courses/{world.course.slug}/lti"
    done = teacher.http.post(tool + path + "/roster", data={"csrf_token": teacher.csrf(path)})
    assert "staff enrolled from the LMS" in teacher.page(done.headers["location"])
