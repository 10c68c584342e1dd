"""The tool's signing keys: one per LMS registration, its public half served at
/lti/jwks/<slug> for that registration's LMS alone.

An LMS checks what the tool signs (the assertion that buys its service tokens, a deep-linking
answer) against the key set it was given. Were one key set to list every registration's keys,
any registration's key would sign for every other's client id; so each LMS reads only its own
registration's keys.

Registrations made before this kept the one key served at /lti/jwks (`LtiPlatform.shared_key`)
until a site administrator rotates them (`kernelgrader lti rotate-key`, or the registration's
page): the LMS's key set URL then changes to the registration's own.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.lti.models import LtiPlatform, LtiToolKey

# A retired key stays in its key set this long: what it signed just before stays verifiable
# (a client assertion lives 60 s, a deep-linking answer a few minutes).
RETIRED_KEPT = timedelta(hours=1)


def _new_key(platform_id: int | None) -> LtiToolKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwcrypto.jwk import JWK

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    # jwcrypto names the key by its RFC 7638 thumbprint; pylti1p3 puts the same kid in the
    # header of everything it signs with this key.
    jwk = JWK.from_pem(pem.encode())
    public = json.loads(jwk.export_public())
    public.update({"alg": "RS256", "use": "sig"})
    return LtiToolKey(
        platform_id=platform_id, kid=public["kid"], private_pem=pem, public_jwk=public
    )


def _current(session: Session, platform_id: int | None) -> LtiToolKey | None:
    owner = (
        LtiToolKey.platform_id.is_(None)
        if platform_id is None
        else LtiToolKey.platform_id == platform_id
    )
    return session.scalar(
        select(LtiToolKey)
        .where(owner, LtiToolKey.retired_at.is_(None))
        .order_by(LtiToolKey.id.desc())
        .limit(1)
    )


def make_key(session: Session, *, platform: LtiPlatform) -> LtiToolKey:
    """A new key of this registration's own (its earlier ones retire)."""
    now = utcnow()
    for old in session.scalars(
        select(LtiToolKey).where(
            LtiToolKey.platform_id == platform.id, LtiToolKey.retired_at.is_(None)
        )
    ):
        old.retired_at = now
    made = _new_key(platform.id)
    session.add(made)
    platform.shared_key = False
    session.flush()
    return made


def signing_key(session: Session, *, platform: LtiPlatform) -> LtiToolKey:
    """The key the tool signs with for this registration now."""
    if platform.shared_key:
        shared = _current(session, None)
        if shared is not None:
            return shared
    own = _current(session, platform.id)
    return own if own is not None else make_key(session, platform=platform)


def _listed(keys: list[LtiToolKey], now: datetime) -> dict[str, Any]:
    return {
        "keys": [
            dict(key.public_jwk)
            for key in keys
            if key.retired_at is None or now - key.retired_at < RETIRED_KEPT
        ]
    }


def key_set(session: Session, *, platform: LtiPlatform) -> dict[str, Any]:
    """The public keys this registration's LMS checks the tool's signatures with."""
    owners = [LtiToolKey.platform_id == platform.id]
    if platform.shared_key:
        owners.append(LtiToolKey.platform_id.is_(None))
    keys = list(session.scalars(select(LtiToolKey).where(or_(*owners)).order_by(LtiToolKey.id)))
    return _listed(keys, utcnow())


def shared_key_set(session: Session) -> dict[str, Any]:
    """/lti/jwks: the one key of the registrations that have not rotated yet (none, once
    every registration has its own)."""
    if session.scalar(select(LtiPlatform.id).where(LtiPlatform.shared_key).limit(1)) is None:
        return {"keys": []}
    keys = list(
        session.scalars(
            select(LtiToolKey).where(LtiToolKey.platform_id.is_(None)).order_by(LtiToolKey.id)
        )
    )
    return _listed(keys, utcnow())
