"""OpenID Connect sign-in through Authlib's Starlette client.

Authlib reads the provider's discovery document, sends the browser to it with a state and a
nonce (kept in the login cookie's session, so only the browser that started the sign-in can
finish it), and at the callback exchanges the code and checks the id_token (signature by the
provider's key set, issuer, audience, expiry, nonce). An id_token must carry its expiry and
issue time: checked here again, so that no version of the library can let a token that never
expires through.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx2
from authlib.integrations.starlette_client import OAuth, OAuthError
from fastapi import Request
from starlette.responses import Response

from app.auth.problems import SignInRefused
from app.core import outbound
from app.sso.service import ProviderView, urls

_oauth = OAuth()


def _client(provider: ProviderView) -> Any:
    # Registered once per process and settings: a changed provider gets a client of its own.
    fingerprint = hashlib.sha256(
        f"{provider.issuer}|{provider.client_id}|{provider.client_secret}".encode()
    ).hexdigest()[:12]
    name = f"{provider.slug}-{fingerprint}"
    client = _oauth.create_client(name)
    if client is None:
        client = _oauth.register(
            name,
            client_id=provider.client_id,
            client_secret=provider.client_secret,
            server_metadata_url=provider.issuer.rstrip("/") + "/.well-known/openid-configuration",
            # Discovery, the key set and the token exchange go through our outbound
            # checks (app.core.outbound): the issuer is typed by an administrator.
            client_kwargs={
                "scope": "openid email profile",
                **outbound.client_options(asynchronous=True, http=httpx2),
            },
        )
    return client


async def start(request: Request, provider: ProviderView) -> Response:
    try:
        response: Response = await _client(provider).authorize_redirect(
            request, urls(provider.slug)["redirect_uri"]
        )
    except Exception as exc:  # the provider's discovery document could not be read
        raise SignInRefused(
            f"{provider.name} could not be reached, so you could not be signed in; try again "
            "in a minute, or log in with your password.",
            f"oidc provider {provider.slug}: discovery at {provider.issuer} failed: "
            f"{outbound.reason(exc)}",
            kind="oidc",
            source=provider.slug,
        ) from None
    return response


async def finish(request: Request, provider: ProviderView) -> tuple[str, str, dict[str, Any]]:
    """The verified subject, issuer and claims (id_token's, with userinfo's added)."""
    try:
        token = await _client(provider).authorize_access_token(request)
    except OAuthError as exc:
        denied = exc.error == "access_denied"
        raise SignInRefused(
            (
                f"You cancelled the sign-in at {provider.name}; sign in again when ready."
                if denied
                else f"The answer from {provider.name} could not be accepted (it may have "
                "been opened twice or taken too long), so you were not signed in; try again."
            ),
            f"oidc provider {provider.slug}: {exc.error}: {exc.description}",
            kind="oidc",
            source=provider.slug,
        ) from None
    except Exception as exc:
        raise SignInRefused(
            f"The answer from {provider.name} could not be checked, so you were not signed "
            "in; try again, and tell your course staff if it keeps happening.",
            f"oidc provider {provider.slug}: {exc!r}",
            kind="oidc",
            source=provider.slug,
        ) from None
    claims: dict[str, Any] = dict(token.get("userinfo") or {})
    missing = [name for name in ("exp", "iat") if not _numeric(claims.get(name))]
    if claims and missing:  # no claims at all: no id_token, refused for its missing subject
        raise SignInRefused(
            f"The answer from {provider.name} could not be accepted, so you were not signed in; "
            "tell your course staff.",
            f"oidc provider {provider.slug}: the id_token has no numeric "
            f"{' or '.join(missing)}; a token without an expiry would work for ever",
            kind="oidc",
            source=provider.slug,
        )
    return str(claims.get("sub", "")), str(claims.get("iss", provider.issuer)), claims


def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
