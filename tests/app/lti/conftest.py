"""kernelgrader on loopback (uvicorn in a thread, the tests' database), an LTI 1.3 platform
beside it (tests/app/lti/platform.py), and a browser made of httpx that follows the two.

The service and the platform talk to each other over real sockets: the platform reads the
tool's key set to check its token requests and deep-linking answers, the tool reads the
platform's key set, token endpoint, roster and grade columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.core.settings import get_settings
from app.courses.models import Enrollment
from app.lti.key_sets import forget as forget_key_sets
from app.lti.models import LtiContext, LtiPlatform
from app.lti.registrations import RegistrationValues, create_registration
from app.lti.tool import forget_tokens
from app.users.models import User, UserIdentity
from tests.app.conftest import PASSWORD, World, make_world
from tests.app.lti.platform import (
    INSTRUCTOR,
    Course,
    Link,
    Person,
    ServerThread,
    TestPlatform,
    form_of,
    free_port,
)


@pytest.fixture(scope="module")
def tool() -> Iterator[str]:
    """The service, with KERNELGRADER_PUBLIC_URL its own loopback address."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    before = os.environ.get("KERNELGRADER_PUBLIC_URL")
    os.environ["KERNELGRADER_PUBLIC_URL"] = base
    get_settings.cache_clear()
    from app.main import create_app

    try:
        with ServerThread(create_app(), port=port):
            yield base
    finally:
        if before is None:
            os.environ.pop("KERNELGRADER_PUBLIC_URL", None)
        else:
            os.environ["KERNELGRADER_PUBLIC_URL"] = before
        get_settings.cache_clear()


@pytest.fixture
def production() -> Iterator[None]:
    """KERNELGRADER_ENV=production for one test: what a deployed server does (the running
    service reads the settings again)."""
    before = os.environ["KERNELGRADER_ENV"]
    os.environ["KERNELGRADER_ENV"] = "production"
    get_settings.cache_clear()
    try:
        yield
    finally:
        os.environ["KERNELGRADER_ENV"] = before
        get_settings.cache_clear()


@pytest.fixture
def lms(tool: str) -> Iterator[TestPlatform]:
    forget_tokens()
    forget_key_sets()
    with TestPlatform(tool_base=tool) as platform:
        yield platform


@pytest.fixture
def world(session: Session) -> World:
    return make_world(session)


def register(session: Session, lms: TestPlatform, **changed: str) -> LtiPlatform:
    """The LMS registered by a site administrator (as `kernelgrader lti add` does)."""
    values = {**lms.values(), **changed}
    platform = create_registration(
        session, slug=values.pop("slug", lms.slug), values=RegistrationValues(**values), by=None
    )
    session.commit()
    return platform


def log_in(browser: Browser, email: str, then: str = "/") -> None:
    """A login with the password, from the login page (`then` the page it goes on to)."""
    answer = browser.http.post(
        browser.tool + "/login",
        data={
            "email": email,
            "password": PASSWORD,
            "csrf_token": browser.csrf("/login"),
            "next": then,
        },
    )
    assert answer.status_code == 303 and answer.headers["location"] == then, answer.text[:2000]


def link_course(
    browser: Browser, lms: TestPlatform, teacher: Person, course: Course, world: World
) -> str:
    """An instructor of the LMS course links it to the world's course: a deep-linking launch
    from it, a login as the world's instructor, the course picked. Returns where it went
    on (the deep-linking page, the browser logged in as that instructor)."""
    landed = browser.launch(lms, teacher, deep_link_in=course)
    assert landed.location.startswith("/lti/continue/"), landed.response.text[:2000]
    log_in(browser, world.instructor.email, then=landed.location)
    assert "Link this LMS course" in browser.page(landed.location)
    done = browser.http.post(
        browser.tool + landed.location,
        data={"course": world.course.slug, "csrf_token": browser.csrf(landed.location)},
    )
    assert done.status_code == 303, done.text[:2000]
    assert done.headers["location"].startswith("/lti/deep-link/")
    return str(done.headers["location"])


def registered_and_linked(
    session: Session, world: World, lms: TestPlatform, course: Course, tool: str
) -> Person:
    """The common start: the LMS registered, and its course linked to the world's course by
    an LMS instructor who is the world's instructor. Returns that LMS instructor."""
    register(session, lms)
    teacher = lms.person("Grace", f"grace.{lms.client_id}@uni.example", role=INSTRUCTOR)
    browser = Browser(tool)
    try:
        link_course(browser, lms, teacher, course, world)
    finally:
        browser.close()
    return teacher


@dataclass
class Landed:
    response: httpx.Response
    browser: Browser

    @property
    def location(self) -> str:
        return self.response.headers.get("location", "")


class Browser:
    """Cookies and redirects as a browser keeps and follows them; forms posted as a browser's
    script would post them."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.http = httpx.Client(timeout=30)

    def close(self) -> None:
        self.http.close()

    def start(
        self, lms: TestPlatform, person: Person, **what: object
    ) -> tuple[str, dict[str, str]]:
        """The LMS starts a launch: returns the form the LMS's page would post to the tool."""
        login = self.http.get(lms.login_initiation(person, **what))  # type: ignore[arg-type]
        assert login.status_code == 302, login.text[:2000]
        authorize = self.http.get(login.headers["location"])
        assert authorize.status_code == 200, authorize.text[:2000]
        return form_of(authorize.text)

    def post(self, action: str, fields: dict[str, str]) -> httpx.Response:
        return self.http.post(action, data=fields)

    def launch(self, lms: TestPlatform, person: Person, **what: object) -> Landed:
        action, fields = self.start(lms, person, **what)
        return Landed(self.post(action, fields), self)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path if path.startswith("http") else self.tool + path)

    def page(self, path: str) -> str:
        answer = self.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:2000])
        return answer.text

    def csrf(self, path: str) -> str:
        import re

        found = re.search(r'name="csrf_token" value="([^"]+)"', self.page(path))
        assert found, path
        return found.group(1)


@pytest.fixture
def browser(tool: str) -> Iterator[Browser]:
    made = Browser(tool)
    yield made
    made.close()


@pytest.fixture
def browsers(tool: str) -> Iterator[object]:
    made: list[Browser] = []

    def make() -> Browser:
        made.append(Browser(tool))
        return made[-1]

    yield make
    for one in made:
        one.close()


def counts(session: Session) -> dict[str, int]:
    """Rows a launch could create, to show that a refused one created none."""
    session.expire_all()
    return {
        name: int(session.scalar(select(func.count()).select_from(model)) or 0)
        for name, model in (
            ("users", User),
            ("identities", UserIdentity),
            ("enrollments", Enrollment),
            ("contexts", LtiContext),
        )
    }


def problems(session: Session) -> list[SignInProblem]:
    session.expire_all()
    return list(session.scalars(select(SignInProblem).order_by(SignInProblem.id)))


__all__ = ["Link"]
