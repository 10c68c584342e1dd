"""Without the `sso` extra the service still starts, and its sign-in pages say what to install."""

from __future__ import annotations

import httpx
import pytest

from app import main
from app.auth import pages as routes
from app.main import create_app


@pytest.mark.anyio
async def test_without_the_sso_extra_the_pages_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(main, "installed", lambda: False)
    app = create_app()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        for path in ("/lti/jwks", "/sso", "/courses/demo/lti"):
            answer = await client.get(path)
            assert answer.status_code == 404
            assert "install kernelgrader[sso]" in answer.text
        assert (await client.get("/api/v1/health")).status_code in (200, 503)


def test_with_it_installed_the_routes_are_there() -> None:
    assert routes.installed()
    paths = {getattr(r, "path", "") for router in main.sign_in_routers() for r in router.routes}
    assert {"/lti/login", "/lti/launch", "/lti/jwks", "/sso/{slug}/callback"} <= paths
