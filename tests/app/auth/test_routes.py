"""Without the `sso` extra the service still starts, and its sign-in pages say what to install."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import main
from app.auth import pages as routes
from app.lti.models import LtiPlatform
from app.main import create_app
from app.sso.models import SsoProvider
from app.sso.service import add_provider, remove_provider
from tests.app.conftest import unique


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


@pytest.mark.anyio
async def test_the_login_page_offers_the_sign_in_ways_set_up_and_no_other(
    client: httpx.AsyncClient, session: Session
) -> None:
    """University sign-in is offered by name for each provider set up, and not at all where
    none is; "open kernelgrader from your LMS course" only where an LMS is registered (issue
    36, item 9: the page offered university sign-in on a server with none)."""

    async def offered() -> tuple[set[str], bool, str]:
        page = (await client.get("/login")).text
        links = set(re.findall(r'href="/sso/([\w-]+)/login', page))
        return links, "from your LMS course" in page, page

    session.expire_all()
    providers = set(session.scalars(select(SsoProvider.slug)))
    lms = session.scalar(select(LtiPlatform.id).limit(1)) is not None
    links, says_lms, page = await offered()
    assert (links, says_lms) == (providers, lms)
    assert 'href="/sso?' not in page and "through your university" not in page
    slug = unique("campus")
    add_provider(
        session,
        slug=slug,
        name="Campus Login",
        kind="oidc",
        issuer="https://idp.campus.example",
        client_id="kernelgrader",
    )
    session.commit()
    links, _, page = await offered()
    assert links == providers | {slug} and "Sign in with Campus Login" in page
    assert remove_provider(session, slug=slug)
    session.commit()
    links, _, page = await offered()
    assert links == providers and "Campus Login" not in page


# A worker installed without the `sso` extra (the Docker worker image) starts: the modules its
# command imports load none of pylti1p3, Authlib or pysaml2 (Docker's smoke test found a worker
# that died at start with "No module named 'pylti1p3'", its upload left queued).
ROOT = Path(__file__).resolve().parents[3]
# What `kernelgrader worker` imports (app/cli/workers.py's `worker`), and the task modules Celery
# loads at its start (app/jobs/celery_app.py's `include`).
WORKER_IMPORTS = [
    "app.cli.workers",
    "app.jobs.gpu_probe",
    "app.core.settings",
    "app.grading.engine",
    "app.grading.sandbox_cleanup",
    "app.grading.sweeper",
    "app.jobs.celery_app",
    "app.jobs.presence",
    "app.jobs.routing",
    "app.jobs.workers",
    "app.lti.sync",
    "app.grading.tasks",
    "app.profiling.tasks",
    "app.similarity.tasks",
]


def test_the_workers_modules_load_without_the_sso_extra(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import importlib, sys

        # As though not installed: an import fails, importlib.util.find_spec finds nothing.
        for name in ("pylti1p3", "authlib", "saml2"):
            sys.modules[name] = None
        for module in {WORKER_IMPORTS!r}:
            importlib.import_module(module)
        from app.lti.sync import LtiSyncThread
        from app.auth.pages import installed
        print("loaded", installed())
        """
    )
    env = {
        "KERNELGRADER_ENV": "test",
        "KERNELGRADER_DATA_DIR": str(tmp_path),
        "KERNELGRADER_SECRET_KEY": "test-secret-key-not-for-production",
        "KERNELGRADER_GRADING_SECRET": "test-grading-secret",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "loaded False", done.stdout
