"""Refused launches kept for the staff (issue 31, class 14): only for a registration and
deployment we know, each course's staff reading their own course's alone, short, few and
gone after the retention period; anything else only logged."""

from __future__ import annotations

import logging
import secrets
import time
from datetime import timedelta

import jwt
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth import problems as kept_problems
from app.auth.models import SignInProblem
from app.core.database import utcnow
from app.lti.launch import CONTEXT, DEPLOYMENT
from tests.app.conftest import World, make_member, make_world, unique
from tests.app.lti.conftest import Browser, log_in, problems, register, registered_and_linked
from tests.app.lti.platform import TestPlatform, rsa_pem_pair


def _forged(lms: TestPlatform, **claims: object) -> str:
    private, _ = rsa_pem_pair()
    now = int(time.time())
    body = {
        "iss": lms.issuer,
        "aud": lms.client_id,
        "sub": "nobody",
        "iat": now,
        "exp": now + 300,
        DEPLOYMENT: lms.deployment_id,
        **claims,
    }
    return jwt.encode(body, private, algorithm="RS256", headers={"kid": secrets.token_hex(6)})


def _count(session: Session) -> int:
    session.expire_all()
    return int(session.scalar(select(func.count()).select_from(SignInProblem)) or 0)


def test_launches_from_nowhere_known_are_logged_not_stored(
    session: Session,
    tool: str,
    lms: TestPlatform,
    browser: Browser,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register(session, lms)
    before = _count(session)
    junk = [
        _forged(lms, iss=f"https://{unique('lms')}.example", aud="x" * 5000),  # no such issuer
        _forged(lms, aud="another-client"),  # the issuer's, another client id
        _forged(lms, **{DEPLOYMENT: "not-a-deployment-of-it"}),
        "not even a token " * 500,
    ]
    with caplog.at_level(logging.WARNING, logger="kernelgrader.sign_in"):
        for token in junk:
            answer = browser.post(f"{tool}/lti/launch", {"id_token": token, "state": "s"})
            assert answer.status_code == 400
    assert _count(session) == before
    assert len([r for r in caplog.records if "sign-in refused" in r.getMessage()]) == len(junk)


def test_each_courses_staff_read_their_own_courses_refusals_only(
    session: Session, world: World, tool: str, lms: TestPlatform, browsers: object
) -> None:
    ada = lms.person("Ada", f"{unique('ada')}@uni.example")
    course = lms.course("GPU", ada)
    registered_and_linked(session, world, lms, course, tool)
    link = lms.link(course, "Scale", {"lab": world.lab.slug})
    student: Browser = browsers()  # type: ignore[operator]
    action, fields = student.start(lms, ada, link=link)
    assert student.post(action, fields).status_code == 303
    replayed = student.post(action, fields)  # the same launch again: refused
    assert replayed.status_code == 400
    session.expire_all()
    (problem,) = [p for p in problems(session) if p.reference in replayed.text]
    assert problem.course_id == world.course.id

    own: Browser = browsers()  # type: ignore[operator]
    log_in(own, world.instructor.email)
    assert problem.reference in own.page(f"/courses/{world.course.slug}/lti")
    assert own.get("/admin/sign-in").status_code == 403

    elsewhere = make_world(session)
    stranger: Browser = browsers()  # type: ignore[operator]
    log_in(stranger, elsewhere.instructor.email)
    assert problem.reference not in stranger.page(f"/courses/{elsewhere.course.slug}/lti")
    assert stranger.get("/admin/sign-in").status_code == 403

    admin = make_member(session, None, world.student.role).user
    admin.is_site_admin = True
    session.commit()
    site: Browser = browsers()  # type: ignore[operator]
    log_in(site, admin.email)
    page = site.page("/admin/sign-in")
    assert problem.reference in page and f"course {world.course.slug}" in page


def test_records_are_short_few_and_gone_after_the_retention_period(
    session: Session,
    world: World,
    tool: str,
    lms: TestPlatform,
    browser: Browser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    course = lms.course("GPU")
    registered_and_linked(session, world, lms, course, tool)
    old = SignInProblem(
        kind="lti",
        source=lms.issuer,
        course_id=world.course.id,
        reference="OLD00001",
        sentence="from long ago",
        detail="",
        created_at=utcnow() - timedelta(days=31),  # the default keeps 30 days
    )
    session.add(old)
    session.commit()
    monkeypatch.setattr(kept_problems, "KEPT_PER_PLACE", 3)

    def refuse() -> None:
        # A known registration, deployment and linked LMS course, and 30 KB of claims.
        token = _forged(lms, aud=[lms.client_id, "a" * 30_000], **{CONTEXT: {"id": course.id}})
        answer = browser.post(f"{tool}/lti/launch", {"id_token": token, "state": "s"})
        assert answer.status_code == 400

    def course_records() -> list[SignInProblem]:
        session.expire_all()
        return list(
            session.scalars(select(SignInProblem).where(SignInProblem.course_id == world.course.id))
        )

    refuse()
    kept = course_records()
    assert [p.reference for p in kept if p.reference == "OLD00001"] == []  # past retention
    assert len(kept) == 1 and len(kept[0].detail) <= 2000 and len(kept[0].sentence) <= 500
    for _ in range(4):
        refuse()
    assert len(course_records()) == 3  # the newest few of this course
