"""Issue 36's forms in a real browser: a lab's settings are one form with one Save, and a form
the server refuses comes back with what was typed and every error beside its field (named in
a summary, tied to the field for screen readers), at 1280 and 390 pixels, axe-core clean.
Screenshots: forms-*."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.core.database import utcnow
from app.courses.service import get_course, get_lab
from app.regrades.service import ask
from app.users.models import User
from tests.app.browser.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETTINGS = "/courses/demo/labs/vector-scale/settings"
WIDTHS = ((1280, 900), (390, 844))


def _lab(server: Server) -> Any:
    with server.session() as session:
        return get_lab(session, course=get_course(session, slug="demo"), slug="vector-scale")


def _invalid_fields(page: Any) -> dict[str, str]:
    """Each field marked aria-invalid, with the text of what its aria-describedby names."""
    return dict(
        page.evaluate(
            """() => [...document.querySelectorAll("[aria-invalid=true]")].map(e => [e.name,
                (e.getAttribute("aria-describedby") || "").split(" ").filter(Boolean)
                  .map(id => (document.getElementById(id) || {innerText: ""}).innerText)
                  .join(" ")])"""
        )
    )


def test_lab_settings_are_one_form_with_one_save(visitor: Any, server: Server) -> None:
    """The due date and the team size saved by one press; before, the team form's Save dropped
    the due date and said only 'Saved: is done in teams of up to 3.'"""
    me = visitor()
    me.login(server.people.instructor)
    me.go(SETTINGS)
    assert me.page.locator("form[method=post] button", has_text="Save").count() == 1
    me.page.fill("#due_at", "2031-05-02T17:00")
    me.page.fill("#team_size", "3")
    me.page.get_by_role("button", name="Save", exact=True).click()
    me.page.wait_for_selector("#message")
    said = me.page.inner_text("#message")
    assert "is done in teams of up to 3" in said and "due 2031-05-02 17:00" in said, said
    assert me.page.input_value("#due_at") == "2031-05-02T17:00"
    lab = _lab(server)
    assert lab.team_size == 3 and lab.due_at is not None
    assert lab.due_at.strftime("%Y-%m-%d %H:%M") == "2031-05-02 17:00"
    for width, height in WIDTHS:
        look = visitor(width=width, height=height)
        look.login(server.people.instructor)
        look.go(SETTINGS)
        assert look.sideways_overflow() == 0, look.overflowing()
        assert look.axe() == []
        look.shot(f"forms-lab-settings-{width}")


def test_lab_settings_refused_keep_what_was_typed_and_name_every_error(
    visitor: Any, server: Server
) -> None:
    """The opening after the due date and a cap past 365: both errors at once, beside their
    fields, and every typed value still there; nothing saved."""
    before = _lab(server)
    for width, height in WIDTHS:
        me = visitor(width=width, height=height)
        me.login(server.people.instructor)
        me.go(SETTINGS)
        me.page.fill("#release_at", "2031-06-10T09:00")
        me.page.fill("#due_at", "2031-06-01T09:00")
        me.page.fill("#late_day_cap", "400")
        me.page.fill("#late_penalty", "12.5")
        with me.page.expect_navigation() as answered:
            me.page.get_by_role("button", name="Save", exact=True).click()
        me.shot(f"forms-lab-settings-refused-{width}")
        assert answered.value.status == 422
        assert me.page.input_value("#release_at") == "2031-06-10T09:00"
        assert me.page.input_value("#due_at") == "2031-06-01T09:00"
        assert me.page.input_value("#late_day_cap") == "400"
        assert me.page.input_value("#late_penalty") == "12.5"
        summary = me.page.inner_text("#error")
        assert "2 problems" in summary, summary
        assert "before the release date" in summary and "0 to 365" in summary, summary
        invalid = _invalid_fields(me.page)
        assert set(invalid) == {"due_at", "late_day_cap"}, invalid
        assert "before the release date" in invalid["due_at"]
        assert "0 to 365" in invalid["late_day_cap"]
        # The summary's links lead to the fields.
        hrefs = me.page.eval_on_selector_all("#error a", "links => links.map(a => a.hash)")
        assert hrefs == ["#due_at", "#late_day_cap"]
        assert me.sideways_overflow() == 0, me.overflowing()
        assert me.axe() == []
    after = _lab(server)
    assert (after.release_at, after.due_at, after.late_day_cap, after.late_penalty) == (
        before.release_at,
        before.due_at,
        before.late_day_cap,
        before.late_penalty,
    )


def test_a_regrade_answer_without_points_keeps_the_staffs_text(
    visitor: Any, server: Server
) -> None:
    with server.session() as session:
        ada = session.scalars(select(User).where(User.email == server.people.student)).one()
        made = ask(
            session,
            user=ada,
            submission_id=server.ids["ada_matmul"],
            text="The 1023 case times out only on the shared GPU; could it be run again?",
            case="",
            now=utcnow(),
        )
        session.commit()
        url = f"/regrade-requests/{made.id}"
    written = "Ran it alone: it passes. Three points back for the time lost."
    for width, height in WIDTHS:
        ta = visitor(width=width, height=height)
        ta.login(server.people.ta)
        ta.go(url)
        ta.page.fill("#answer-form textarea[name=answer]", written)
        with ta.page.expect_navigation() as answered:
            ta.page.click("#answer-form button[value=adjust]")
        ta.shot(f"forms-regrade-refused-{width}")
        assert answered.value.status == 422
        assert ta.page.input_value("#answer-form textarea[name=answer]") == written
        assert "Give the points" in ta.page.inner_text("#error")
        assert "Give the points" in _invalid_fields(ta.page)["points"]
        assert ta.axe() == []
        assert "open" in ta.page.inner_text("#state")


def test_a_wrong_password_keeps_the_email(visitor: Any, server: Server) -> None:
    for width, height in WIDTHS:
        me = visitor(width=width, height=height)
        me.page.goto(server.base + "/login")
        me.page.fill("#email", server.people.student)
        me.page.fill("#password", "not the password")
        with me.page.expect_navigation() as answered:
            me.page.click("button[type=submit]")
        me.shot(f"forms-login-refused-{width}")
        assert answered.value.status == 401
        assert me.page.input_value("#email") == server.people.student
        assert me.page.input_value("#password") == ""
        assert "do not match" in me.page.inner_text("#error")
        assert me.axe() == []
