"""The form helper every page uses (app.web.forms): every field's error at once, beside its
field, what was typed kept (never a password), and the refusal's status."""

from __future__ import annotations

import html
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Forbidden, Invalid
from app.web.forms import PostedForm, whole_number
from app.web.templating import templates
from tests.app.conftest import make_world
from tests.app.web.test_routes import csrf_of, login


def test_every_fields_error_is_kept_not_only_the_first() -> None:
    form = PostedForm({"days": "two", "cap": "x", "reason": "travel"})
    days = form.read("days", lambda text: whole_number(text, "Days"))
    cap = form.read("cap", lambda text: whole_number(text, "Cap"))
    reason = form.read("reason", str.strip)
    assert (days, cap, reason) == (None, None, "travel")
    assert form.errors == {
        "days": "Days must be a whole number, not 'two'.",
        "cap": "Cap must be a whole number, not 'x'.",
    }
    assert not form.ok and form.status_code == 422


def test_a_services_error_lands_beside_the_field_it_names() -> None:
    form = PostedForm({"answer": "", "points": ""})

    def answer() -> None:
        raise Invalid("Write the answer; it cannot be empty.", field="text")

    assert form.attempt(answer, fields={"text": "answer"}) is None
    assert form.attempt(lambda: 3) == 3
    assert form.errors == {"answer": "Write the answer; it cannot be empty."}


def test_the_first_refusals_status_is_the_pages() -> None:
    form = PostedForm()
    form.take(Forbidden("Only instructors may."))
    form.refuse("team_size", "Too many.")
    assert form.status_code == 403
    assert form.errors == {"": "Only instructors may.", "team_size": "Too many."}


def test_two_forms_of_one_page_are_told_apart_and_passwords_are_not_kept() -> None:
    form = PostedForm({"days": "x", "password": "secret", "csrf_token": "t"}, prefix="budget-")
    form.read("days", lambda text: whole_number(text, "Late days"))
    assert form.values == {"budget-days": "x"}
    assert list(form.errors) == ["budget-days"]


def test_the_macros_mark_the_field_and_name_every_error_in_the_summary() -> None:
    form = PostedForm({"due_at": "2031-06-01T09:00", "late_day_cap": "400"})
    form.refuse("due_at", "The due date would be before the release date.")
    form.refuse("late_day_cap", "A lab's late-day cap is 0 to 365 days, or none.")
    page = templates.env.from_string(
        '{% from "_macros.html" import problems, invalid, field_error, typed %}'
        "{{ problems(form) }}"
        '<input id="due_at" value="{{ typed(form, "due_at", "old") }}"'
        '{{ invalid(form, "due_at") }}>'
        '{{ field_error(form, "due_at") }}'
        '<input id="team_size" value="{{ typed(form, "team_size", "1") }}"'
        '{{ invalid(form, "team_size") }}>'
    ).render(form=form)
    assert "2 problems to fix" in page
    assert '<a href="#due_at">The due date' in page and '<a href="#late_day_cap">' in page
    assert 'value="2031-06-01T09:00" aria-invalid="true" aria-describedby="due_at-error"' in page
    assert '<span class="field-error" id="due_at-error">The due date' in page
    assert '<input id="team_size" value="1">' in page
    blank = templates.env.from_string(
        '{% from "_macros.html" import problems, typed %}{{ problems(form, error) }}'
        '{{ typed(form, "due_at", "old") }}'
    )
    assert blank.render(form=None, error=None).strip() == "old"
    assert 'id="error" role="alert">Gone.</p>' in blank.render(form=None, error="Gone.")


@pytest.mark.anyio
async def test_late_days_and_extensions_keep_what_was_typed_and_name_every_error(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=30))
    await login(client, world.instructor)
    url = f"/courses/{world.course.slug}/late-days"
    token = csrf_of((await client.get(url)).text)
    budget = {"csrf_token": token, "action": "budget", "days": "2"}
    r = await client.post(url, data={**budget, "cap": "900", "regrade_window": "9000"})
    assert r.status_code == 422
    page = html.unescape(r.text)
    assert "2 problems to fix" in page
    assert "The regrade window is 0 to 365 days" in page and "A per-lab cap is 0 to" in page
    assert 'id="budget-cap" type="number" name="cap" min="0" value="900"' in page
    assert 'value="9000" style="width:6rem" aria-invalid="true"' in page
    assert 'aria-describedby="budget-regrade_window-error"' in page
    # The other form of the page shares the field name "days", and is left alone.
    assert 'id="adjust-days" type="number" name="days" required style="width:6rem" value=""' in page
    session.refresh(world.course)
    assert world.course.late_days != 2
    adjust = {"csrf_token": token, "action": "adjust", "email": world.student.email}
    r = await client.post(url, data={**adjust, "days": "0", "reason": "conference travel"})
    assert r.status_code == 422
    page = html.unescape(r.text)
    assert f'<option value="{world.student.email}" selected>' in page
    assert 'value="conference travel"' in page and 'aria-describedby="adjust-days-error"' in page
    url = f"/courses/{world.course.slug}/extensions"
    grant = {"csrf_token": token, "lab": world.lab.slug, "email": world.student.email}
    early = (utcnow() - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    r = await client.post(url, data={**grant, "until": early, "note": "illness, see mail"})
    assert r.status_code == 422
    page = html.unescape(r.text)
    assert f'value="{early}" aria-invalid="true" aria-describedby="until-error"' in page
    assert 'value="illness, see mail"' in page and "not after the lab's own due" in page


@pytest.mark.anyio
async def test_lab_settings_save_dates_and_policies_in_one_post(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/settings"
    await login(client, world.instructor)
    page = (await client.get(url)).text
    assert page.count(">Save</button>") == 1 and "/policies" not in page
    token = csrf_of(page)
    r = await client.post(
        url, data={"csrf_token": token, "due_at": "2031-05-02T17:00", "team_size": "3"}
    )
    assert r.status_code == 303
    said = html.unescape((await client.get(r.headers["location"])).text)
    assert "Saved: due 2031-05-02 17:00 UTC; is done in teams of up to 3." in said
    # A field the post leaves out keeps its value: the team size is not reset to 1.
    r = await client.post(url, data={"csrf_token": token, "late_policy": "refuse"})
    assert r.status_code == 303
    session.refresh(world.lab)
    assert (world.lab.team_size, world.lab.late_policy) == (3, "refuse")
    assert world.lab.due_at is not None and world.lab.grades_released_at is None
    r = await client.post(url, data={"csrf_token": token, "release_now": "1"})
    assert r.status_code == 303
    session.refresh(world.lab)
    assert world.lab.grades_released_at is not None
    bad = {"release_at": "2031-06-10T09:00", "due_at": "2031-06-01T09:00", "team_size": "0"}
    r = await client.post(url, data={"csrf_token": token, **bad, "late_penalty": "120"})
    assert r.status_code == 422
    page = html.unescape(r.text)
    assert "3 problems to fix" in page
    for field in ("due_at", "team_size", "late_penalty"):
        assert f'aria-describedby="{field}-error"' in page, field
    assert 'value="2031-06-10T09:00"' in page and 'value="120"' in page
    session.refresh(world.lab)
    assert world.lab.team_size == 3 and world.lab.due_at.year == 2031
    assert world.lab.due_at.month == 5
