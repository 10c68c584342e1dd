"""'Forgot password' mails a reset link through the configured SMTP server, a real one on
loopback here; without mail the page says whom to ask (issue 19, item 9). The request itself
reads no table, whatever the address, so neither its answer nor its time tells who has an
account (issue 31, class 10); a reset link never retires the invite the staff made (class 15).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import event

from app.core.database import get_engine
from app.core.mail import outbox
from app.users.resets import reset_requests
from tests.app.conftest import World, unique
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def mailed() -> None:
    """Wait until the reset thread has looked up every address handed to it, and the outbox
    has handed every mail to the SMTP server."""
    reset_requests.wait_until_done()
    outbox.wait_until_sent()


@contextmanager
def statements() -> Iterator[list[tuple[str, str]]]:
    """Every SQL statement run meanwhile, with the name of the thread that ran it."""
    seen: list[tuple[str, str]] = []

    def note(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append((threading.current_thread().name, statement))

    engine = get_engine()
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


async def test_without_mail_the_page_says_to_ask_the_staff(client: httpx.AsyncClient) -> None:
    login = (await client.get("/login")).text
    assert 'href="/password/forgot"' in login
    page = await client.get("/password/forgot")
    assert page.status_code == 200
    # In a student's words: whom to ask, and no command for them to run (issue 36, item 9).
    assert "ask your course staff for a link" in page.text
    assert "`" not in page.text and "kernelgrader user" not in page.text
    assert 'name="email"' not in page.text
    r = await client.post(
        "/password/forgot", data={"email": "a@b.edu", "csrf_token": csrf_of(login)}
    )
    assert r.status_code == 503 and "ask your course staff for a link" in r.text


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
    mailed()
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
    mailed()
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
    mailed()
    assert len(mail_server.to(world.ta.email)) == 3


async def test_the_request_reads_no_table_so_an_account_shows_in_neither_answer_nor_time(
    client: httpx.AsyncClient,
    world: World,
    mail_server: Inbox,  # noqa: F811
) -> None:
    """Equal time by construction: the request path runs no SQL for either address (the
    lookup, the link and the mail are the reset thread's), and both answers are the same page.
    bench/forgot_password.py prints the two cases' times."""
    page = await client.get("/password/forgot")
    token = csrf_of(page.text)
    answers, work = [], []
    with statements() as everything:
        for email in (world.student.email, f"{unique('nobody')}@nowhere.edu"):
            with statements() as seen:
                r = await client.post(
                    "/password/forgot", data={"email": email, "csrf_token": token}
                )
                answers.append((r.status_code, r.text))
            # The service's own background threads (the reset thread among them) are named so.
            work.append([sql for thread, sql in seen if not thread.startswith("kernelgrader-")])
        mailed()
    assert work == [[], []]
    assert answers[0] == answers[1] and answers[0][0] == 200
    # Both addresses reached the reset thread, which looked each up; only the account got mail.
    lookups = [
        sql for thread, sql in everything if thread == "kernelgrader-resets" and "users" in sql
    ]
    assert len([sql for sql in lookups if sql.lstrip().startswith("SELECT")]) >= 2
    assert len(mail_server.to(world.student.email)) == 1


async def test_a_strangers_reset_request_leaves_the_staffs_invite_working(
    client: httpx.AsyncClient,
    world: World,
    mail_server: Inbox,  # noqa: F811
) -> None:
    await login(client, world.instructor)
    email = f"{unique('newcomer')}@uni.edu"
    people = f"/courses/{world.course.slug}/people"
    page = await client.get(people)
    r = await client.post(
        f"{people}/add", data={"email": email, "invite": "true", "csrf_token": csrf_of(page.text)}
    )
    assert r.status_code == 303
    mailed()
    (invite,) = mail_server.to(email)
    invite_link = re.search(r"/invite/(\S+)", body_of(invite))
    assert invite_link
    # A stranger asks for a reset link for the newcomer's address, twice.
    stranger = httpx.AsyncClient(transport=client._transport, base_url="http://testserver")
    async with stranger:
        form = await stranger.get("/password/forgot")
        for _ in range(2):
            data = {"email": email, "csrf_token": csrf_of(form.text)}
            assert (await stranger.post("/password/forgot", data=data)).status_code == 200
    mailed()
    _, first_reset, second_reset = mail_server.to(email)
    links = [re.search(r"/invite/(\S+)", body_of(m)) for m in (first_reset, second_reset)]
    assert all(links)
    # The staff's invite still works; of the reset links, only the newer.
    assert (await client.get(f"/invite/{invite_link.group(1)}")).status_code == 200
    assert (await client.get(f"/invite/{links[0].group(1)}")).status_code == 404  # type: ignore[union-attr]
    assert (await client.get(f"/invite/{links[1].group(1)}")).status_code == 200  # type: ignore[union-attr]
    # Using the invite sets the password, and every other link stops working.
    client.cookies.clear()
    form = await client.get(f"/invite/{invite_link.group(1)}")
    new = {"password": "the newcomer's own", "confirm": "the newcomer's own"}
    r = await client.post(
        f"/invite/{invite_link.group(1)}", data={**new, "csrf_token": csrf_of(form.text)}
    )
    assert r.status_code == 303
    assert (await client.get(f"/invite/{links[1].group(1)}")).status_code == 404  # type: ignore[union-attr]
