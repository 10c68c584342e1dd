"""Students and staff make, name, list and revoke their own API tokens on /account (issue 19,
item 10)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.app.conftest import World
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


async def test_a_student_creates_uses_and_revokes_a_named_token(
    client: httpx.AsyncClient, world: World
) -> None:
    await login(client, world.student)
    page = await client.get("/account")
    assert 'id="create-token"' in page.text
    r = await client.post(
        "/account/tokens", data={"name": "build server", "csrf_token": csrf_of(page.text)}
    )
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
