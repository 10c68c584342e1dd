"""The tool's signing key, made once and kept in the database; its public half is the JWKS
that every LMS reads at /lti/jwks."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.lti.models import LtiToolKey


def _new_key() -> LtiToolKey:
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
    return LtiToolKey(kid=public["kid"], private_pem=pem, public_jwk=public)


def current_key(session: Session) -> LtiToolKey:
    """The key the tool signs with now, made on first use."""
    key = session.scalar(
        select(LtiToolKey).where(LtiToolKey.retired_at.is_(None)).order_by(LtiToolKey.id.desc())
    )
    if key is not None:
        return key
    made = _new_key()
    try:
        with session.begin_nested():
            session.add(made)
    except IntegrityError:  # pragma: no cover - two first requests at once
        pass
    key = session.scalar(
        select(LtiToolKey).where(LtiToolKey.retired_at.is_(None)).order_by(LtiToolKey.id.desc())
    )
    assert key is not None
    return key


def key_set(session: Session) -> dict[str, Any]:
    current_key(session)
    keys = session.scalars(select(LtiToolKey).order_by(LtiToolKey.id)).all()
    return {"keys": [dict(key.public_jwk) for key in keys]}
