"""A bare OpenID provider on loopback whose id_token claims the test chooses, down to leaving
out `exp`, which oidc-provider-mock always writes. The code flow only: discovery, a key set,
an authorization endpoint that answers at once for the test's person, a token endpoint."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.app.lti.platform import ServerThread, free_port


class BareProvider:
    __test__ = False

    def __init__(self) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.client_id, self.client_secret = "bare-client", secrets.token_urlsafe(16)
        # The signed-in person's claims, and the registered claims to leave out of the token.
        self.claims: dict[str, Any] = {}
        self.leave_out: set[str] = set()
        self._nonces: dict[str, tuple[str, str]] = {}
        routes = [
            Route("/.well-known/openid-configuration", self._discovery),
            Route("/jwks", self._jwks),
            Route("/authorize", self._authorize),
            Route("/token", self._token, methods=["POST"]),
        ]
        self.server = ServerThread(Starlette(routes=routes), port=self.port)

    async def _discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def _jwks(self, request: Request) -> Response:
        key = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return JSONResponse({"keys": [{**key, "kid": "bare", "use": "sig", "alg": "RS256"}]})

    async def _authorize(self, request: Request) -> Response:
        query = request.query_params
        code = secrets.token_urlsafe(16)
        self._nonces[code] = (query.get("nonce", ""), query["client_id"])
        target = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
        return RedirectResponse(target, status_code=302)

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        nonce, client_id = self._nonces.pop(str(form["code"]))
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            **self.claims,
        }
        for name in self.leave_out:
            claims.pop(name, None)
        id_token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "bare"})
        return JSONResponse(
            {
                "access_token": secrets.token_urlsafe(16),
                "token_type": "Bearer",
                "id_token": id_token,
            }
        )

    def __enter__(self) -> BareProvider:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)
