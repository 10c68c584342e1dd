"""Account hygiene (issue 31, class 15), against the service on loopback (uvicorn in a thread):
a new password, set on /account or through a link, ends the account's other sessions and
revokes its API tokens; "sign out everywhere" ends every session; a stranger's wrong guesses
lock out only the stranger's own address, never the owner at theirs (distinct loopback
addresses, 127.0.0.x, stand for distinct clients)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.settings import get_settings
from app.users.invites import issue_invite
from app.users.models import InviteKind
from tests.app.conftest import PASSWORD, Member, World, make_world, unique
from tests.app.lti.conftest import tool  # noqa: F401

NEW_PASSWORD = "a brand new password"


@pytest.fixture
def world(session: Session) -> World:
    return make_world(session)


class Client:
    """A browser on loopback at its own address (127.0.0.x)."""

    def __init__(self, base: str, address: str = "127.0.0.1") -> None:
        self.base = base
        self.http = httpx.Client(
            base_url=base, transport=httpx.HTTPTransport(local_address=address), timeout=30
        )

    def csrf(self, path: str) -> str:
        found = re.search(r'name="csrf_token" value="([^"]+)"', self.http.get(path).text)
        assert found, path
        return found.group(1)

    def login(self, email: str, password: str = PASSWORD) -> httpx.Response:
        data = {"email": email, "password": password, "csrf_token": self.csrf("/login")}
        return self.http.post("/login", data=data)

    def signed_in(self) -> bool:
        answer = self.http.get("/account")
        assert answer.status_code in (200, 303), answer.status_code
        return answer.status_code == 200


@pytest.fixture
def clients(tool: str) -> Iterator[object]:  # noqa: F811
    made: list[Client] = []

    def make(address: str = "127.0.0.1") -> Client:
        made.append(Client(tool, address))
        return made[-1]

    yield make
    for one in made:
        one.http.close()


def token_works(base: str, world: World, member: Member) -> bool:
    answer = httpx.get(f"{base}/api/v1/courses/{world.course.slug}/labs", headers=member.auth)
    assert answer.status_code in (200, 401), answer.text
    return answer.status_code == 200


def test_a_password_change_signs_out_the_other_browsers_and_revokes_tokens(
    world: World,
    tool: str,  # noqa: F811
    clients: object,
) -> None:
    mine, theirs = clients(), clients()  # type: ignore[operator]
    for browser in (mine, theirs):
        assert browser.login(world.student.email).status_code == 303
    assert token_works(tool, world, world.student)
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    assert theirs.http.get(labs).status_code == 200  # the login cookie reads the API
    page = mine.http.get("/account").text
    assert "A new password signs you out in every other browser" in page
    changed = mine.http.post(
        "/account/password",
        data={
            "current": PASSWORD,
            "password": NEW_PASSWORD,
            "confirm": NEW_PASSWORD,
            "csrf_token": mine.csrf("/account"),
        },
    )
    assert changed.status_code == 303
    assert "every other browser" in unquote(changed.headers["location"])
    assert "your 1 API token was revoked" in unquote(changed.headers["location"])
    assert mine.signed_in() and not theirs.signed_in()
    # The login cookie no longer reads the API either, and the token is revoked.
    assert theirs.http.get(labs).status_code == 401
    assert not token_works(tool, world, world.student)
    assert theirs.login(world.student.email).status_code == 401
    assert theirs.login(world.student.email, NEW_PASSWORD).status_code == 303


def test_a_reset_link_signs_out_everywhere_and_revokes_tokens(
    session: Session,
    world: World,
    tool: str,  # noqa: F811
    clients: object,
) -> None:
    intruder = clients()  # type: ignore[operator]
    assert intruder.login(world.ta.email).status_code == 303
    issued = issue_invite(session, user=world.ta.user, now=utcnow(), kind=InviteKind.reset)
    session.commit()
    owner = clients()  # type: ignore[operator]
    path = issued.url.removeprefix(get_settings().public_url)
    form = owner.http.get(path)
    assert "signs the account out in every other browser" in form.text
    done = owner.http.post(
        path,
        data={"password": NEW_PASSWORD, "confirm": NEW_PASSWORD, "csrf_token": owner.csrf(path)},
    )
    assert done.status_code == 303
    assert owner.signed_in() and not intruder.signed_in()
    assert not token_works(tool, world, world.ta)


def test_sign_out_everywhere_ends_every_session_and_keeps_the_tokens(
    world: World,
    tool: str,  # noqa: F811
    clients: object,
) -> None:
    here, there = clients(), clients()  # type: ignore[operator]
    for browser in (here, there):
        assert browser.login(world.instructor.email).status_code == 303
    out = here.http.post("/account/sessions/end", data={"csrf_token": here.csrf("/account")})
    assert out.status_code == 303 and out.headers["location"] == "/login?signed_out=1"
    assert "You are signed out everywhere" in here.http.get(out.headers["location"]).text
    assert not here.signed_in() and not there.signed_in()
    assert token_works(tool, world, world.instructor)
    assert there.login(world.instructor.email).status_code == 303 and there.signed_in()


def test_a_strangers_guesses_do_not_lock_the_owner_out_at_their_own_address(
    world: World,
    clients: object,
) -> None:
    allowed = get_settings().login_max_failures
    stranger = clients("127.0.0.2")  # type: ignore[operator]
    for _ in range(allowed):
        assert stranger.login(world.student.email, "a wrong guess").status_code == 401
    refused = stranger.login(world.student.email, "another guess")
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    owner = clients("127.0.0.3")  # type: ignore[operator]
    assert owner.login(world.student.email).status_code == 303


def test_an_address_still_waits_after_five_times_the_failures_over_any_accounts(
    session: Session,
    clients: object,
) -> None:
    per_account = get_settings().login_max_failures
    sprayer = clients("127.0.0.4")  # type: ignore[operator]
    for _ in range(5 * per_account):
        email = f"{unique('sprayed')}@example.edu"
        assert sprayer.login(email, "a guess").status_code == 401
    assert sprayer.login(f"{unique('fresh')}@example.edu", "a guess").status_code == 429
