"""The course's LMS page: the tool's values to copy, registering an LMS, who may do what."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.lti.models import LtiPlatform
from tests.app.conftest import PASSWORD, World
from tests.app.lti.conftest import Browser
from tests.app.lti.platform import TestPlatform


def _logged_in(browser: Browser, email: str) -> Browser:
    answer = browser.http.post(
        browser.tool + "/login",
        data={"email": email, "password": PASSWORD, "csrf_token": browser.csrf("/login")},
    )
    assert answer.status_code == 303
    return browser


def test_an_instructor_registers_an_lms_from_the_page_and_it_launches(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    teacher = _logged_in(browsers(), world.instructor.email)  # type: ignore[operator]
    path = f"/courses/{world.course.slug}/lti"
    page = teacher.page(path)
    assert f'id="tool-login">{tool}/lti/login<' in page
    assert f'id="tool-launch">{tool}/lti/launch<' in page
    assert f'id="tool-jwks">{tool}/lti/jwks<' in page
    assert "https://sso.canvaslms.com/api/lti/authorize_redirect" in page  # the LMS hints
    # The key set the page names is the tool's, as an LMS reads it.
    keys = teacher.get("/lti/jwks").json()["keys"]
    assert keys and all(k["kty"] == "RSA" and k["alg"] == "RS256" and "d" not in k for k in keys)

    bad = teacher.http.post(
        tool + path + "/platforms",
        data={**lms.values(), "key_set_url": "not a url", "csrf_token": teacher.csrf(path)},
    )
    assert "is not a web address; copy it from the LMS" in teacher.page(bad.headers["location"])
    done = teacher.http.post(
        tool + path + "/platforms", data={**lms.values(), "csrf_token": teacher.csrf(path)}
    )
    assert "Registered Test LMS" in teacher.page(done.headers["location"])
    again = teacher.http.post(
        tool + path + "/platforms", data={**lms.values(), "csrf_token": teacher.csrf(path)}
    )
    assert "is registered already" in teacher.page(again.headers["location"])
    session.expire_all()
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.client_id == lms.client_id))
    assert platform is not None and platform.course_id == world.course.id
    assert platform.deployment_ids == [lms.deployment_id]

    ada = lms.person("Ada", "ada.page@uni.example")
    course = lms.course("GPU", ada)
    landed = browsers().launch(lms, ada, link=lms.link(course, "Scale", {"lab": world.lab.slug}))  # type: ignore[operator]
    assert landed.location.endswith(f"/labs/{world.lab.slug}")
    assert "GPU" in teacher.page(path)  # the LMS course now opens this course


def test_tas_see_the_page_but_only_instructors_register(
    world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    ta = _logged_in(browsers(), world.ta.email)  # type: ignore[operator]
    path = f"/courses/{world.course.slug}/lti"
    page = ta.page(path)
    assert 'id="tool-launch"' in page and 'id="register"' not in page
    refused = ta.http.post(
        tool + path + "/platforms", data={**lms.values(), "csrf_token": ta.csrf(path)}
    )
    assert refused.status_code == 403
    student = _logged_in(browsers(), world.student.email)  # type: ignore[operator]
    assert student.get(path).status_code == 403
