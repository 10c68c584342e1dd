"""Forged or replayed launches are refused with a sentence, logged, create nothing; kept for
the course's staff when they name a registration and deployment we know."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from sqlalchemy.orm import Session

from tests.app.conftest import World
from tests.app.lti.conftest import Browser, counts, problems, registered_and_linked
from tests.app.lti.platform import TestPlatform, rsa_pem_pair


def _resign_with_another_key(token: str) -> str:
    """The same claims and key id, signed by a key that is not the LMS's."""
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    forger, _ = rsa_pem_pair()
    return jwt.encode(claims, forger, algorithm="RS256", headers={"kid": header["kid"]})


def _expect_refusal(
    session: Session,
    browser: Browser,
    action: str,
    fields: dict[str, str],
    *,
    sentence: str,
    detail: str,
    caplog: pytest.LogCaptureFixture,
    logged_out: bool = True,
    kept: bool = True,
) -> None:
    before, seen = counts(session), len(problems(session))
    with caplog.at_level(logging.WARNING, logger="kernelgrader.sign_in"):
        answer = browser.post(action, fields)
    assert answer.status_code == 400, answer.text[:2000]
    assert sentence in answer.text
    reference = re.search(r'id="reference">([0-9A-F]+)<', answer.text)
    assert reference, answer.text[:2000]
    assert counts(session) == before  # nothing was created
    logged = problems(session)[seen:]
    assert any(
        reference.group(1) in r.getMessage() and detail in r.getMessage() for r in caplog.records
    )
    if kept:
        assert [p.reference for p in logged] == [reference.group(1)]
        assert detail in logged[0].detail, logged[0].detail
    else:  # it names no registration we know: logged, not stored
        assert logged == []
    if logged_out:  # no one was logged in by it
        home = browser.get("/")
        assert home.status_code == 303 and home.headers["location"].startswith("/login")


@pytest.fixture
def launch_of(
    session: Session, world: World, tool: str, lms: TestPlatform, browser: Browser
) -> Callable[[], tuple[str, dict[str, str]]]:
    person = lms.person("Mallory", "mallory@uni.example")
    course = lms.course("GPU", person)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    return lambda: browser.start(lms, person, link=link)


def test_a_launch_signed_by_another_key_is_refused(
    session: Session, browser: Browser, launch_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    action, fields = launch_of()
    fields["id_token"] = _resign_with_another_key(fields["id_token"])
    _expect_refusal(
        session,
        browser,
        action,
        fields,
        sentence="This launch is not signed by your LMS",
        detail="Signature verification failed",
        caplog=caplog,
    )


def test_a_launch_for_another_audience_is_refused(
    session: Session,
    browser: Browser,
    lms: TestPlatform,
    launch_of: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lms.tamper = lambda: {"aud": "some-other-tool", "azp": "some-other-tool"}
    action, fields = launch_of()
    _expect_refusal(
        session,
        browser,
        action,
        fields,
        sentence="does not know (or was meant for another tool)",
        detail="some-other-tool",
        caplog=caplog,
        kept=False,
    )


def test_a_replayed_launch_is_refused(
    session: Session, browser: Browser, launch_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    action, fields = launch_of()
    first = browser.post(action, fields)
    assert first.status_code == 303  # the real launch goes through once
    _expect_refusal(
        session,
        browser,
        action,
        fields,
        sentence="This launch was already used or has expired",
        detail="Invalid Nonce",
        caplog=caplog,
        logged_out=False,  # the first, real launch logged this browser in
    )


def test_an_expired_launch_is_refused(
    session: Session,
    browser: Browser,
    lms: TestPlatform,
    launch_of: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lms.expires_in = -120  # signed with an expiry two minutes gone
    action, fields = launch_of()
    _expect_refusal(
        session,
        browser,
        action,
        fields,
        sentence="expired before it arrived",
        detail="Signature has expired",
        caplog=caplog,
    )


def test_a_launch_without_an_expiry_is_refused(
    session: Session,
    browser: Browser,
    lms: TestPlatform,
    launch_of: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Class 16: an id_token with no `exp` would be good forever once signed (and taken
    from a log or a browser's history); LTI requires one, so it is refused."""
    lms.expires_in = 0  # the platform signs it with neither iat nor exp
    lms.tamper = lambda: {"iat": int(time.time())}  # iat alone: only exp is missing
    action, fields = launch_of()
    claims = jwt.decode(fields["id_token"], options={"verify_signature": False})
    assert "exp" not in claims and "iat" in claims
    _expect_refusal(
        session,
        browser,
        action,
        fields,
        sentence="lacks its expiry or issue time",
        detail='Token is missing the "exp" claim',
        caplog=caplog,
    )


def test_a_launch_without_its_login_is_refused(
    session: Session,
    browser: Browser,
    tool: str,
    launch_of: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A valid launch posted from another browser (no state cookie, as in a forged form)."""
    action, fields = launch_of()
    other = Browser(tool)
    try:
        _expect_refusal(
            session,
            other,
            action,
            fields,
            sentence="does not match a sign-in started from your LMS",
            detail="State not found",
            caplog=caplog,
        )
    finally:
        other.close()


def test_an_unregistered_lms_cannot_start_a_login(
    session: Session, world: World, lms: TestPlatform, browser: Browser
) -> None:
    person = lms.person("Eve", "eve@uni.example")
    course = lms.course("GPU", person)
    link = lms.link(course, "Scale")
    before, seen = counts(session), len(problems(session))
    answer = browser.http.get(lms.login_initiation(person, link=link))
    assert answer.status_code == 400
    assert "This LMS is not registered with kernelgrader" in answer.text
    assert counts(session) == before
    assert len(problems(session)) == seen  # anyone can send this: logged, not stored
