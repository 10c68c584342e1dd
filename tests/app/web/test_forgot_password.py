"""'Forgot password' mails a reset link through the configured SMTP server, a real one on
loopback here; without mail the page says to ask the staff (issue 19, item 9)."""

from __future__ import annotations

import re

import httpx
import pytest

from app.core.mail import outbox
from tests.app.conftest import World
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401
from tests.app.web.test_routes import csrf_of

pytestmark = pytest.mark.anyio


async def test_without_mail_the_page_says_to_ask_the_staff(client: httpx.AsyncClient) -> None:
    login = (await client.get("/login")).text
    assert 'href="/password/forgot"' in login
    page = await client.get("/password/forgot")
    assert page.status_code == 200
    assert "ask your course staff" in page.text and 'name="email"' not in page.text
    r = await client.post(
        "/password/forgot", data={"email": "a@b.edu", "csrf_token": csrf_of(login)}
    )
    assert r.status_code == 503 and "ask your course staff" in r.text


async def test_a_reset_link_by_mail_sets_a_new_password(
    client: httpx.AsyncClient,
    world: World,
    mail_server: Inbox,  # noqa: F811
) -> None:
    page = await client.get("/password/forgot")
    assert 'name="email"' in page.text
    r = await client.post(
        "/password/forgot",
        data={"email": world.student.email.upper(), "csrf_token": csrf_of(page.text)},
    )
    assert r.status_code == 200 and "on its way" in r.text
    outbox.wait_until_sent()
    (mail,) = mail_server.to(world.student.email)
    assert mail["Subject"] == "Set a new kernelgrader password"
    assert mail["From"] == "kernelgrader <grader@example.edu>"
    link = re.search(r"http://\S+/invite/(\S+)", body_of(mail))
    assert link, body_of(mail)
    # An address without an account is told the same, and nothing is sent.
    r = await client.post(
        "/password/forgot", data={"email": "nobody@nowhere.edu", "csrf_token": csrf_of(page.text)}
    )
    assert r.status_code == 200 and "on its way" in r.text
    outbox.wait_until_sent()
    assert mail_server.to("nobody@nowhere.edu") == []
    # The link sets the password and logs in; it works once.
    invite = await client.get(f"/invite/{link.group(1)}")
    assert invite.status_code == 200 and world.student.email in invite.text
    form = {"password": "a new password 1", "confirm": "a new password 1"}
    r = await client.post(
        f"/invite/{link.group(1)}", data={**form, "csrf_token": csrf_of(invite.text)}
    )
    assert r.status_code == 303
    client.cookies.clear()
    login = await client.get("/login")
    r = await client.post(
        "/login",
        data={
            "email": world.student.email,
            "password": "a new password 1",
            "csrf_token": csrf_of(login.text),
        },
    )
    assert r.status_code == 303
    assert (await client.get(f"/invite/{link.group(1)}")).status_code == 404


async def test_reset_requests_for_one_address_are_throttled(
    client: httpx.AsyncClient,
    world: World,
    mail_server: Inbox,  # noqa: F811
) -> None:
    page = await client.get("/password/forgot")
    data = {"email": world.ta.email, "csrf_token": csrf_of(page.text)}
    codes = [(await client.post("/password/forgot", data=data)).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    outbox.wait_until_sent()
    assert len(mail_server.to(world.ta.email)) == 3
