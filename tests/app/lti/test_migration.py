"""Migration 0011 on a database that already had LMS registrations (made by instructors,
under the old rules): they keep working on the one shared key until rotated, an issuer
registered twice stays with its first registration, LMS users are tied to the registration
that owns their issuer, linked LMS courses stay linked. And back down again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.core.database import alembic_config, engine_for
from app.core.settings import get_settings
from app.lti.keys import key_set, make_key, shared_key_set, signing_key
from app.lti.models import LtiContext, LtiPlatform


@pytest.fixture
def old_database(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    before = os.environ["KERNELGRADER_DATABASE_URL"]
    os.environ["KERNELGRADER_DATABASE_URL"] = url
    get_settings.cache_clear()
    try:
        command.upgrade(alembic_config(), "0010")
        yield url
    finally:
        os.environ["KERNELGRADER_DATABASE_URL"] = before
        get_settings.cache_clear()


ROWS = """
INSERT INTO users (id, email, name, created_at) VALUES
    (1, 'teacher@uni.example', '', '2026-01-01'), (2, 'ada@uni.example', '', '2026-01-01');
INSERT INTO courses (id, slug, title, created_at) VALUES (1, 'gpu', 'GPU', '2026-01-01');
INSERT INTO lti_platforms (id, name, issuer, client_id, auth_login_url, auth_token_url,
    key_set_url, auth_audience, deployment_ids, course_id, created_by_id, created_at) VALUES
    (1, 'Canvas', 'https://canvas.example', 'c1', 'https://a', 'https://t', 'https://k', '',
     '["d1"]', 1, 1, '2026-01-01'),
    (2, 'Evil', 'https://canvas.example', 'c2', 'https://a', 'https://t', 'https://k', '',
     '["d2"]', 1, 1, '2026-01-02'),
    (3, 'Moodle', 'https://moodle.example', 'm1', 'https://a', 'https://t', 'https://k', '',
     '["d3"]', NULL, 1, '2026-01-03');
INSERT INTO lti_tool_keys (id, kid, private_pem, public_jwk, created_at) VALUES
    (1, 'shared-kid', '-', '{"kid": "shared-kid", "kty": "RSA"}', '2026-01-01');
INSERT INTO user_identities (id, user_id, kind, issuer, subject, email, created_at,
    last_seen_at) VALUES
    (1, 2, 'lti', 'https://canvas.example', 's1', '', '2026-01-01', '2026-01-01'),
    (2, 2, 'lti', 'https://moodle.example', 's1', '', '2026-01-01', '2026-01-01'),
    (3, 2, 'oidc', 'https://login.example', 's1', '', '2026-01-01', '2026-01-01');
INSERT INTO lti_contexts (id, platform_id, deployment_id, context_id, title, course_id,
    memberships_url, lineitems_url, ags_scopes, roster_result, created_at) VALUES
    (1, 1, 'd1', 'ctx', 'GPU', 1, '', '', '[]', '', '2026-01-01');
"""


def test_old_registrations_migrate_and_keep_working_until_rotated(old_database: str) -> None:
    engine = engine_for(old_database)
    with engine.begin() as connection:
        for statement in ROWS.split(";"):
            if statement.strip():
                connection.execute(text(statement))
    command.upgrade(alembic_config(), "head")

    with Session(engine) as session:
        rows = {p.id: p for p in session.query(LtiPlatform)}
        assert [(p.slug, p.shared_key) for p in rows.values()] == [
            ("lms-1", True),
            ("lms-2", True),
            ("lms-3", True),
        ]
        assert rows[1].issuer == "https://canvas.example"
        assert rows[2].issuer == "disabled-duplicate-2:https://canvas.example"
        identities = dict(
            session.execute(text("SELECT id, platform_id FROM user_identities")).all()
        )
        assert identities == {1: 1, 2: 3, 3: None}
        assert session.get_one(LtiContext, 1).course_id == 1

        # The shared key still signs for them, at /lti/jwks and at their own URL alike.
        assert signing_key(session, platform=rows[1]).kid == "shared-kid"
        assert [k["kid"] for k in shared_key_set(session)["keys"]] == ["shared-kid"]
        assert [k["kid"] for k in key_set(session, platform=rows[1])["keys"]] == ["shared-kid"]
        # Rotated: its own key only, and the shared one is no longer its.
        own = make_key(session, platform=rows[1])
        assert signing_key(session, platform=rows[1]).kid == own.kid
        assert [k["kid"] for k in key_set(session, platform=rows[1])["keys"]] == [own.kid]
        assert [k["kid"] for k in key_set(session, platform=rows[3])["keys"]] == ["shared-kid"]
        for platform in rows.values():
            platform.shared_key = False
        session.flush()
        assert shared_key_set(session) == {"keys": []}  # nobody's: not served any more
        session.commit()

    command.downgrade(alembic_config(), "0010")
    with engine.connect() as connection:
        keys = connection.execute(text("SELECT kid FROM lti_tool_keys")).scalars().all()
        assert keys == ["shared-kid"]  # the per-registration keys went with the schema
    engine.dispose()
