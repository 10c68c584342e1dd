"""Staff and students help themselves in the browser, with a real SMTP server on loopback:
people and a roster (item 8), "forgot password" by mail (item 9), API tokens (item 10), the
labs' order (item 11); and issue 36's item 9: a used invite link, a token shown after a
redirect with a copy button, team invitations announced and closed, the login page's ways in.
Screenshots at 1280 and 390 px of each page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.core.database import utcnow
from app.core.mail import outbox  # noqa: F401  (the server's outbox runs in its own process)
from app.courses.service import get_course, get_lab
from app.sso.service import add_provider, remove_provider
from app.teams import service as teams
from app.users.invites import issue_invite
from app.users.models import User
from app.users.service import ensure_user
from tests.app.browser.conftest import Server
from tests.app.browser.seed import PASSWORD
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


def test_a_used_invite_link_says_so_and_shows_the_way_in(visitor: Any, server: Server) -> None:
    """Issue 36, item 9: a used link told a student to run a CLI command, with no link on."""
    with server.session() as session:
        person = ensure_user(session, email="used-twice@uni.edu", name="")
        token = issue_invite(session, user=person, now=utcnow()).url.rsplit("/", 1)[1]
        session.commit()
    first = visitor()
    first.page.goto(f"{server.base}/invite/{token}")
    first.page.fill("#password", "a sample passphrase")
    first.page.fill("#confirm", "a sample passphrase")
    first.page.click("main button[type=submit]")
    first.page.wait_for_url(re.compile(r".*/$"))
    for width, height in ((1280, 900), (390, 844)):
        v = visitor(width=width, height=height)
        answer = v.page.goto(f"{server.base}/invite/{token}")
        assert answer is not None and answer.status == 404
        assert v.page.inner_text("h1") == "This link does not work"
        said = v.page.inner_text("#error")
        assert "already used" in said and "`" not in said and "kernelgrader user" not in said
        assert v.axe() == []
        assert v.sideways_overflow() == 0, v.overflowing()
        v.shot(f"36-invite-used-{width}")
        if width == 1280:
            v.page.click("#next-steps >> text=Forgot your password?")
            v.page.wait_for_url("**/password/forgot")
            v.page.go_back()
            v.page.click("#next-steps >> text=Log in")
            v.page.wait_for_url("**/login")
            v.page.fill("#email", "used-twice@uni.edu")
            v.page.fill("#password", "a sample passphrase")
            v.page.click("main button[type=submit]")
            v.page.wait_for_load_state()
            assert "/login" not in v.page.url


def test_reloading_after_a_new_token_makes_no_second_one_and_copy_copies_it(
    visitor: Any, server: Server, browser: Any
) -> None:
    """Issue 36, item 9: reloading the page a token was shown on posted the form again."""
    for width, height in ((1280, 900), (390, 844)):
        v = visitor(width=width, height=height)
        v.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
        v.login("frances@uni.edu")
        v.go("/account")
        label = f"reload test {width}"
        v.page.fill("#create-token input[name=name]", label)
        v.page.click("#create-token button[type=submit]")
        token = v.page.inner_text("#token-value").strip()
        assert token.startswith("kg_") and token not in v.page.url
        v.page.click("#copy-token")
        v.page.wait_for_function("document.getElementById('copy-said').textContent !== ''")
        assert v.page.inner_text("#copy-said").startswith("Copied")
        assert v.page.evaluate("navigator.clipboard.readText()") == token
        assert v.axe() == []
        assert v.sideways_overflow() == 0, v.overflowing()
        v.shot(f"36-account-token-{width}")
        v.page.reload()
        assert v.page.locator("#token-value").count() == 0 and token not in v.page.content()
        listed = v.page.locator("#token-list tr", has_text=label).count()
        assert listed == 1, v.page.inner_text("#token-list")
    # Without script the token is still there to select, and no dead button shows.
    bare = browser.new_context(java_script_enabled=False)
    try:
        page = bare.new_page()
        page.goto(server.base + "/login")
        page.fill("#email", "frances@uni.edu")
        page.fill("#password", PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_load_state()
        page.goto(server.base + "/account")
        page.fill("#create-token input[name=name]", "no script")
        page.click("#create-token button[type=submit]")
        assert page.inner_text("#token-value").startswith("kg_")
        assert not page.locator("#copy-token").is_visible()
    finally:
        bare.close()


def test_a_team_invitation_is_announced_and_a_full_team_closes_it(
    visitor: Any, server: Server
) -> None:
    """Issue 36, item 9: invitations were shown on the team page alone, and one to a team that
    filled up stayed pending."""
    with server.session() as session:
        course = get_course(session, slug="demo")
        lab = get_lab(session, course=course, slug="vector-scale")
        lab.team_size = 2
        alan = session.scalars(select(User).where(User.email == "alan@uni.edu")).one()
        teams.start_team(
            session, course=course, lab=lab, user=alan, name="Warp Speed", now=utcnow()
        )
        session.commit()
    alan_v = visitor()
    alan_v.login("alan@uni.edu")
    alan_v.go("/courses/demo/labs/vector-scale/teams")
    for guest in ("barbara@uni.edu", "claude@uni.edu"):
        alan_v.page.fill("#invite input[name=email]", guest)
        alan_v.page.click("#invite button[type=submit]")
        alan_v.page.wait_for_selector("#message")
    (mail,) = wait_for_mail(server, "barbara@uni.edu")
    assert "Warp Speed" in body_of(mail) and "/courses/demo/labs/vector-scale/teams" in body_of(
        mail
    )
    pages = {}
    for width, height in ((1280, 900), (390, 844)):
        v = visitor(width=width, height=height)
        v.login("claude@uni.edu")
        for name, path in (("course", "/courses/demo"), ("lab", "/courses/demo/labs/vector-scale")):
            v.go(path)
            said = v.page.inner_text("#team-invitations")
            assert "Alan Turing invites you to the team Warp Speed" in said, said
            assert v.axe() == []
            assert v.sideways_overflow() == 0, v.overflowing()
            v.shot(f"36-invitation-{name}-{width}")
        pages[width] = v
    # Barbara accepts from her course page; the team is full, Claude's invitation is closed.
    barbara = visitor()
    barbara.login("barbara@uni.edu")
    barbara.go("/courses/demo")
    barbara.page.click('#team-invitations button[aria-label="Accept the invitation to Warp Speed"]')
    barbara.page.wait_for_selector("#message")
    assert "You joined Warp Speed" in barbara.page.inner_text("#message")
    wait_for_mail(server, "claude@uni.edu", count=2)
    claude = pages[1280]
    claude.go("/courses/demo")
    assert claude.page.locator("#team-invitations").count() == 0
    for width, v in pages.items():
        v.go("/courses/demo/labs/vector-scale")
        said = v.page.inner_text("#team-invitations")
        assert "Warp Speed filled up before you answered" in said, said
        assert v.page.locator("#team-invitations button").count() == 0
        assert v.axe() == []
        v.shot(f"36-invitation-closed-lab-{width}")
    claude.go("/courses/demo/labs/vector-scale/teams")
    assert "filled up before you answered" in claude.page.inner_text("#my-team")
    assert claude.page.locator("#invitations").count() == 0


def test_the_login_page_offers_university_sign_in_only_where_it_is_set_up(
    visitor: Any, server: Server
) -> None:
    """Issue 36, item 9: the login page offered university sign-in on a server with none."""
    v = visitor()
    v.go("/login")
    assert v.page.locator('a[href^="/sso"]').count() == 0
    assert "university" not in v.page.inner_text("main").lower()
    assert "LMS" not in v.page.inner_text("main")
    assert v.axe() == []
    v.shot("36-login-1280")
    phone = visitor(width=390, height=844)
    phone.go("/login")
    assert phone.sideways_overflow() == 0
    phone.shot("36-login-390")
    with server.session() as session:
        add_provider(
            session,
            slug="campus",
            name="Campus Login",
            kind="oidc",
            issuer="https://idp.campus.example",
            client_id="kernelgrader",
        )
        session.commit()
    try:
        v.go("/login?next=/account")
        link = v.page.locator("#other-ways a", has_text="Sign in with Campus Login")
        assert link.get_attribute("href") == "/sso/campus/login?next=/account"
        assert v.axe() == []
        v.shot("36-login-with-provider-1280")
    finally:
        with server.session() as session:
            remove_provider(session, slug="campus")
            session.commit()
