"""/docs can send a token, and every route documents the errors it answers with (issue 19,
item 5)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio


async def test_every_token_route_declares_the_bearer_scheme_and_its_errors(
    client: httpx.AsyncClient,
) -> None:
    schema = (await client.get("/openapi.json")).json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["apiToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schemes["apiToken"]["description"],
    }
    error = schema["components"]["schemas"]["ErrorDetail"]
    assert error["required"] == ["detail"] and error["properties"]["detail"]["type"] == "string"
    operations = [
        (path, method, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if path.startswith("/api/v1/")
    ]
    assert len(operations) >= 20
    for path, method, op in operations:
        codes = set(op["responses"])
        where = f"{method.upper()} {path}"
        assert "503" in codes, where
        if path == "/api/v1/health":
            assert "security" not in op, where
            continue
        assert op.get("security") == [{"apiToken": []}], where
        assert "401" in codes, where
        for code in codes - {"200", "201", "202", "204", "422"}:
            content = op["responses"][code]["content"]["application/json"]["schema"]
            assert content == {"$ref": "#/components/schemas/ErrorDetail"}, (where, code)
        if "{course}" in path or "{submission_id}" in path:
            assert "404" in codes, where
    submit = schema["paths"]["/api/v1/courses/{course}/labs/{lab}/submissions"]["post"]
    assert {"401", "403", "404", "413", "422", "429", "503"} <= set(submit["responses"])
    assert "Retry-After" in submit["responses"]["429"]["headers"]


async def test_redoc_loads_nothing_from_a_cdn(client: httpx.AsyncClient) -> None:
    page = (await client.get("/redoc")).text
    assert 'src="/docs/redoc.js"' in page
    bundle = await client.get("/docs/redoc.js")
    assert bundle.status_code == 200 and "javascript" in bundle.headers["content-type"]
    assert "cdn.redoc.ly" not in bundle.text
    assert "https://" not in page.replace("https://fonts", "")  # no Google fonts either


async def test_the_favicon_is_served(client: httpx.AsyncClient) -> None:
    ico = await client.get("/favicon.ico")
    assert ico.status_code == 200 and ico.headers["content-type"] == "image/x-icon"
    assert ico.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
    svg = await client.get("/favicon.svg")
    assert svg.status_code == 200 and svg.text.startswith("<svg")
    login = (await client.get("/login")).text
    assert 'rel="icon" href="/favicon.svg"' in login
