"""What the service asks of an LMS, over the real service and platform (issue 31, class 6):
an unauthenticated launch cannot make it fetch at will, in production it reaches no internal
address, and what an LMS answers is shown to nobody beyond a status line."""

from __future__ import annotations

import secrets
import time

import jwt
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.lti.key_sets import REFETCH_SECONDS
from app.lti.launch import CONTEXT, DEPLOYMENT
from app.lti.models import LtiContext
from tests.app.conftest import World
from tests.app.lti.conftest import Browser, log_in, problems, register, registered_and_linked
from tests.app.lti.platform import TestPlatform, rsa_pem_pair


def _forged(lms: TestPlatform, *, issuer: str | None = None, kid: str | None = None) -> str:
    """A launch that names the registration and its deployment, signed by anyone's key."""
    private, _ = rsa_pem_pair()
    now = int(time.time())
    claims = {
        "iss": issuer or lms.issuer,
        "aud": lms.client_id,
        "sub": "nobody",
        "iat": now,
        "exp": now + 300,
        "nonce": secrets.token_hex(8),
        DEPLOYMENT: lms.deployment_id,
        CONTEXT: {"id": "ctx-none"},
    }
    return jwt.encode(
        claims, private, algorithm="RS256", headers={"kid": kid or secrets.token_hex(8)}
    )


def test_launches_with_new_key_ids_fetch_the_key_set_once_per_interval(
    session: Session, tool: str, lms: TestPlatform, browser: Browser
) -> None:
    register(session, lms)
    started = time.monotonic()
    for _ in range(12):
        answer = browser.post(
            f"{tool}/lti/launch", {"id_token": _forged(lms), "state": "x" + secrets.token_hex(4)}
        )
        assert answer.status_code == 400
    elapsed = time.monotonic() - started
    # One fetch, and one more for each interval the posts spanned: not one per post.
    assert 1 <= lms.jwks_fetches <= 1 + int(elapsed // REFETCH_SECONDS), (lms.jwks_fetches, elapsed)
    # A launch naming no registration we know sends nothing out at all.
    fetched = lms.jwks_fetches
    other = browser.post(
        f"{tool}/lti/launch",
        {"id_token": _forged(lms, issuer="https://lms.attacker.example"), "state": "y"},
    )
    assert other.status_code == 400 and lms.jwks_fetches == fetched


def test_in_production_a_key_set_on_an_internal_address_is_not_fetched(
    session: Session, tool: str, lms: TestPlatform, browser: Browser, request: pytest.FixtureRequest
) -> None:
    """A registration whose key set URL points inside the network (here: loopback, plain
    http) costs the launch, never a request to that address."""
    register(session, lms)
    seen = len(problems(session))
    request.getfixturevalue("production")
    answer = browser.post(f"{tool}/lti/launch", {"id_token": _forged(lms), "state": "x"})
    assert answer.status_code == 400
    assert "could not read your LMS" in answer.text and "signing keys" in answer.text
    assert lms.jwks_fetches == 0
    (kept,) = problems(session)[seen:]
    assert "only https:// is used" in kept.detail


def test_an_lms_answer_is_shown_only_as_its_status_line(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    """The LMS's roster endpoint fails with a page of its own text: the staff read the
    status, and the text is stored and shown nowhere."""
    course = lms.course("GPU")
    registered_and_linked(session, world, lms, course, tool)
    lms.roster_failure = (500, "Traceback: db-password=hunter2 in /srv/lms/config.php")
    staff: Browser = browsers()  # type: ignore[operator]
    log_in(staff, world.instructor.email)
    path = f"/courses/{world.course.slug}/lti"
    answer = staff.http.post(tool + path + "/roster", data={"csrf_token": staff.csrf(path)})
    page = staff.page(answer.headers["location"])
    assert "The LMS did not give the roster: HTTP 500 Internal Server Error" in page
    assert "hunter2" not in page
    session.expire_all()
    context = session.scalar(select(LtiContext).where(LtiContext.context_id == course.id))
    assert context is not None and "hunter2" not in context.roster_result
    assert "HTTP 500" in context.roster_result
    assert not session.scalars(
        select(SignInProblem.id).where(SignInProblem.detail.contains("hunter2"))
    ).all()
