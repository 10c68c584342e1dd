"""Students and staff make, name, list and revoke their own API tokens on /account (issue 19,
item 10)."""

from __future__ import annotations

import base64
import json
import re

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import new_tokens
from app.auth.models import SignInState
from app.users.models import ApiToken
from tests.app.conftest import World
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


async def test_a_student_creates_uses_and_revokes_a_named_token(
    client: httpx.AsyncClient, world: World
) -> None:
    await login(client, world.student)
    page = await client.get("/account")
    assert 'id="create-token"' in page.text
    made = await client.post(
        "/account/tokens", data={"name": "build server", "csrf_token": csrf_of(page.text)}
    )
    assert made.status_code == 303 and made.headers["location"].startswith("/account?")
    r = await client.get(made.headers["location"])
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    token = re.search(r'id="token-value">(kg_[^<]+)<', r.text)
    assert token, r.text
    assert "shown only this once" in r.text
    # It works on the API as the student...
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    auth = {"Authorization": f"Bearer {token.group(1)}"}
    assert (await client.get(labs, headers=auth)).status_code == 200
    # ...the list names it and never shows it again...
    listed = (await client.get("/account")).text
    assert "build server" in listed and token.group(1) not in listed
    row = re.search(r'action="/account/tokens/(\d+)/revoke"', listed.split("build server", 1)[1])
    assert row
    # ...another person cannot revoke it...
    other = httpx.AsyncClient(transport=client._transport, base_url="http://testserver")
    async with other:
        await login(other, world.other_student)
        theirs = await other.get("/account")
        refused = await other.post(
            f"/account/tokens/{row.group(1)}/revoke", data={"csrf_token": csrf_of(theirs.text)}
        )
        assert refused.status_code == 404
    assert (await client.get(labs, headers=auth)).status_code == 200
    # ...and revoking it ends it at once.
    r = await client.post(
        f"/account/tokens/{row.group(1)}/revoke", data={"csrf_token": csrf_of(listed)}
    )
    assert r.status_code == 303 and "Revoked" in r.headers["location"]
    after = await client.get(labs, headers=auth)
    assert after.status_code == 401 and "/account" in after.json()["detail"]
    assert "build server" not in (await client.get("/account")).text


async def test_a_token_needs_a_name(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.ta)
    page = await client.get("/account")
    r = await client.post("/account/tokens", data={"name": "  ", "csrf_token": csrf_of(page.text)})
    assert r.status_code == 422 and "Name the token" in r.text


async def test_a_new_token_is_shown_once_after_the_redirect_and_kept_nowhere_in_the_clear(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    """Reloading the page a new token is shown on makes no second token (issue 36, item 9):
    the form redirects, and the token waits for that page split between a pad in the database
    and the token XOR the pad in the session cookie; neither, nor the URL, holds it."""
    await login(client, world.student)
    page = await client.get("/account")
    made = await client.post(
        "/account/tokens", data={"name": "laptop", "csrf_token": csrf_of(page.text)}
    )
    assert made.status_code == 303
    location = made.headers["location"]
    assert "Created+the+token+laptop" in location or "Created%20the%20token%20laptop" in location
    cookie = client.cookies.get("kernelgrader_session")
    assert cookie
    kept = [json.dumps(row.data) for row in session.scalars(select(SignInState)) if row.data]
    shown = await client.get(location)
    token = re.search(r'id="token-value">(kg_[^<]+)<', shown.text)
    assert token, shown.text
    value = token.group(1)
    assert 'id="copy-token"' in shown.text
    # The token was in none of the places it waited in, not even encoded.
    payload = cookie.split(".", 1)[0]
    opened = base64.b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert "sealed" in opened  # the cookie's half is there, and it is not the token
    for place in [location, cookie, opened, *kept]:
        for form in (value, value.encode().hex(), base64.b64encode(value.encode()).decode()):
            assert form not in place, place
    auth = {"Authorization": f"Bearer {value}"}
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    assert (await client.get(labs, headers=auth)).status_code == 200
    # A reload (of the page, not the form) shows no token and makes none.
    again = await client.get(location)
    assert again.status_code == 200 and value not in again.text
    assert 'id="token-value"' not in again.text
    session.expire_all()
    names = session.scalars(
        select(ApiToken.name).where(
            ApiToken.user_id == world.student.user.id, ApiToken.revoked_at.is_(None)
        )
    ).all()
    assert names.count("laptop") == 1
    # The cookie as it was before the token was shown opens nothing now: its pad is gone.
    pads = session.scalars(
        select(SignInState.data).where(SignInState.key.startswith(new_tokens.KEY_PREFIX))
    ).all()
    assert pads and all(pad is None for pad in pads), pads
    replay = httpx.AsyncClient(transport=client._transport, base_url="http://testserver")
    async with replay:
        replay.cookies.set("kernelgrader_session", cookie)
        late = await replay.get("/account")
        assert late.status_code == 200 and value not in late.text
    # A pad is taken only by the account it was made for, and only once.
    cookie_half: dict[str, object] = {}
    new_tokens.hold(session, cookie_half, user_id=world.student.user.id, token="kg_secret")
    copy = dict(cookie_half)
    assert new_tokens.take(session, copy, user_id=world.other_student.user.id) is None
    assert new_tokens.take(session, dict(cookie_half), user_id=world.student.user.id) == (
        "kg_secret"
    )
    assert new_tokens.take(session, dict(cookie_half), user_id=world.student.user.id) is None
