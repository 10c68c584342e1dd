"""Staff and students help themselves in the browser, with a real SMTP server on loopback:
people and a roster (item 8), "forgot password" by mail (item 9), API tokens (item 10), the
labs' order (item 11). Screenshots at 1280 and 390 px of each page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.mail import outbox  # noqa: F401  (the server's outbox runs in its own process)
from tests.app.browser.conftest import Server
from tests.app.mail.smtp import body_of

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MAIL = True  # this module's server sends mail to a server of the tests (conftest's `mail`)


def wait_for_mail(server: Server, to: str, count: int = 1) -> list[Any]:
    import time

    assert server.mail is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = server.mail.to(to)
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no mail to {to} within 30 s; the inbox holds {server.mail.messages}")


def test_an_instructor_previews_and_applies_a_roster_then_manages_people(
    visitor: Any, server: Server, tmp_path: Path
) -> None:
    teacher = visitor()
    teacher.login(server.people.instructor)
    teacher.go("/courses/demo")
    teacher.page.click("text=People")
    teacher.page.wait_for_url("**/courses/demo/people")
    teacher.shot("19-people-1280")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "email,name,role\n"
        "newcomer@uni.edu,New Comer,\n"
        "alan@uni.edu,,ta\n"  # Alan Turing is a student: he becomes a TA
        "ada@uni.edu,Ada Lovelace,student\n"
        "broken-line,,\n",
        encoding="utf-8",
    )
    teacher.page.set_input_files("#roster input[type=file]", str(roster))
    teacher.page.click("#roster button[type=submit]")
    teacher.page.wait_for_selector("#summary")
    summary = teacher.page.inner_text("#summary")
    assert summary.startswith("Applying this roster would add 1 (1 of them without an account yet")
    assert "Nothing has changed yet: no account is made" in summary
    assert "Line 5" in teacher.page.inner_text("#problems")
    assert "newcomer@uni.edu" in teacher.page.inner_text("#adds")
    teacher.shot("19-roster-preview-1280")
    phone = visitor(width=390, height=844)
    phone.login(server.people.instructor)
    phone.page.goto(server.base + "/courses/demo/people")
    phone.page.set_input_files("#roster input[type=file]", str(roster))
    phone.page.click("#roster button[type=submit]")
    phone.page.wait_for_selector("#summary")
    assert phone.sideways_overflow() == 0, phone.overflowing()
    phone.shot("19-roster-preview-390")
    # Nothing changed until Apply; then the newcomer gets a mailed link.
    teacher.page.click("#apply button[type=submit]")
    teacher.page.wait_for_selector("#message")
    assert "1 added, 1 with a new role" in teacher.page.inner_text("#message")
    people = teacher.page.inner_text("#people")
    assert "newcomer@uni.edu" in people
    alan = teacher.page.locator('#people tr[data-email="alan@uni.edu"] select[name=role]')
    assert alan.input_value() == "ta"
    (mail,) = wait_for_mail(server, "newcomer@uni.edu")
    assert "/invite/" in body_of(mail)
    # Change a role back, resend an invite, remove someone.
    alan.select_option("student")
    teacher.page.locator('#people tr[data-email="alan@uni.edu"] button', has_text="Change").click()
    teacher.page.wait_for_selector("#message")
    assert "is now a student (was a ta)" in teacher.page.inner_text("#message")
    row = teacher.page.locator('#people tr[data-email="newcomer@uni.edu"]')
    row.locator("button", has_text="Resend invite").click()
    teacher.page.wait_for_selector("#message")
    wait_for_mail(server, "newcomer@uni.edu", count=2)
    teacher.page.once("dialog", lambda dialog: dialog.accept())
    teacher.page.locator('#people tr[data-email="newcomer@uni.edu"] button.danger').click()
    teacher.page.wait_for_selector("#message")
    assert "Removed newcomer@uni.edu" in teacher.page.inner_text("#message")
    assert "newcomer@uni.edu" not in teacher.page.inner_text("#people")
    teacher.shot("19-people-after-1280")
    phone.go("/courses/demo/people")
    assert phone.sideways_overflow() == 0, phone.overflowing()
    phone.shot("19-people-390")
    # A TA sees the list, not the forms.
    ta = visitor()
    ta.login(server.people.ta)
    ta.go("/courses/demo/people")
    assert ta.page.locator("#add-person").count() == 0
    assert "Only instructors change" in ta.page.inner_text("main")


def test_forgot_password_mails_a_link_that_sets_a_new_one(visitor: Any, server: Server) -> None:
    v = visitor()
    v.go("/login")
    v.page.click("text=Forgot your password?")
    v.page.wait_for_url("**/password/forgot")
    v.shot("19-forgot-1280")
    v.page.fill("#email", server.people.unnamed)
    v.page.click("main button[type=submit]")
    v.page.wait_for_selector("#sent")
    assert "on its way" in v.page.inner_text("#sent")
    v.shot("19-forgot-sent-1280")
    (mail,) = wait_for_mail(server, server.people.unnamed)
    link = re.search(r"(http://\S+/invite/\S+)", body_of(mail))
    assert link, body_of(mail)
    assert link.group(1).startswith(server.base)
    v.page.goto(link.group(1))
    v.page.fill("#password", "grace's new pw")
    v.page.fill("#confirm", "grace's new pw")
    v.page.click("main button[type=submit]")
    v.page.wait_for_url(re.compile(r".*/courses/demo$"))
    # The new password logs in.
    again = visitor()
    again.go("/login")
    again.page.fill("#email", server.people.unnamed)
    again.page.fill("#password", "grace's new pw")
    again.page.click("main button[type=submit]")
    again.page.wait_for_load_state()
    assert "/login" not in again.page.url
    phone = visitor(width=390, height=844)
    phone.go("/password/forgot")
    assert phone.sideways_overflow() == 0
    phone.shot("19-forgot-390")


def test_a_student_makes_a_token_uses_it_and_revokes_it(visitor: Any, server: Server) -> None:
    v = visitor()
    v.login(server.people.student)
    v.go("/account")
    v.page.fill("#create-token input[name=name]", "homework script")
    v.page.click("#create-token button[type=submit]")
    token = v.page.inner_text("#token-value").strip()
    assert token.startswith("kg_")
    v.shot("19-account-token-shown-1280")
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{server.base}/api/v1/courses/demo/labs", headers=auth).status_code == 200
    v.go("/account")
    assert token not in v.page.content() and "homework script" in v.page.inner_text("#token-list")
    v.shot("19-account-1280")
    phone = visitor(width=390, height=844)
    phone.login(server.people.student)
    phone.go("/account")
    assert phone.sideways_overflow() == 0, phone.overflowing()
    phone.shot("19-account-390")
    v.page.click('#token-list button[aria-label="Revoke the token homework script"]')
    v.page.wait_for_selector("#message")
    assert "Revoked the token homework script" in v.page.inner_text("#message")
    assert httpx.get(f"{server.base}/api/v1/courses/demo/labs", headers=auth).status_code == 401


def test_the_instructor_orders_the_labs_and_the_gradebook_follows(
    visitor: Any, server: Server
) -> None:
    teacher = visitor()
    teacher.login(server.people.instructor)
    teacher.go("/courses/demo")
    first = teacher.page.locator("#labs tr").nth(1).inner_text()
    assert first.startswith("Scale a vector")  # the teaching order: vector-scale first
    teacher.page.click('button[aria-label^="Move Elementwise"][aria-label$="up"]')
    teacher.page.wait_for_selector("#message")
    assert "hadamard" in teacher.page.locator("#labs tr").nth(1).inner_text()
    teacher.shot("19-course-ordered-1280")
    teacher.go("/courses/demo/gradebook")
    heads = teacher.page.locator("table.book th.lab .name").all_inner_texts()
    assert heads[0].startswith("Elementwise") and "hadamard" not in heads  # titles, not slugs
    total = teacher.page.inner_text("#total-head")
    assert re.search(r"/\d+", total), total
    teacher.shot("19-gradebook-1280")
    student = visitor(width=390, height=844)
    student.login(server.people.student)
    student.go("/courses/demo")
    assert "hadamard" in student.page.locator("#labs tr").nth(1).inner_text()
    assert student.sideways_overflow() == 0
    student.shot("19-course-ordered-390")
    phone = visitor(width=390, height=844)
    phone.login(server.people.instructor)
    phone.go("/courses/demo/gradebook")
    assert phone.sideways_overflow() == 0
    phone.shot("19-gradebook-390")
