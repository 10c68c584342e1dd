"""pylti1p3 (the LTI 1.3 library) fitted to kernelgrader: its request, cookies and launch
storage, registrations read from the database, and a token cache for the LMS's services.

pylti1p3 is written for Django and Flask; these small classes are the framework glue it asks
for. The library does the protocol and the checks (state, nonce, signature, registration,
deployment, message); nothing here decodes or verifies a token by hand.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from pylti1p3.cookie import CookieService
from pylti1p3.deployment import Deployment
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.registration import Registration
from pylti1p3.request import Request
from pylti1p3.service_connector import ServiceConnector
from pylti1p3.session import SessionService
from pylti1p3.tool_config import ToolConfAbstract
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import states
from app.core import outbound
from app.lti.keys import signing_key
from app.lti.models import LtiPlatform

# How long a login's state and nonce wait for the launch (pylti1p3's own cookie lives 5 min).
STATE_SECONDS = 600


class ToolRequest(Request):
    """The query and form parameters of one request."""

    def __init__(self, params: dict[str, str], *, secure: bool) -> None:
        self._params = params
        self._secure = secure

    @property
    def session(self) -> Any:  # pragma: no cover - our session service never asks
        raise NotImplementedError

    def is_secure(self) -> bool:
        return self._secure

    def get_param(self, key: str) -> str:
        return self._params.get(key, "")


@dataclass
class CookieJar(CookieService):
    """Cookies pylti1p3 reads from the request, and those it wants set on the response."""

    incoming: dict[str, str]
    secure: bool
    outgoing: list[tuple[str, str, int | None]] = field(default_factory=list)

    def _name(self, name: str) -> str:
        return f"{self._cookie_prefix}-{name}"

    def get_cookie(self, name: str) -> str | None:
        return self.incoming.get(self._name(name))

    def set_cookie(self, name: str, value: str | int, exp: int | None = 3600) -> None:
        self.outgoing.append((self._name(name), str(value), exp))

    def apply(self, response: Any) -> None:
        for name, value, exp in self.outgoing:
            # The launch comes back as a post from the LMS's site: over HTTPS the state
            # cookie must be SameSite=None to travel with it (browsers refuse None without
            # Secure, and on plain HTTP the state and nonce in the database still hold).
            response.set_cookie(
                name,
                value,
                max_age=exp,
                httponly=True,
                secure=self.secure,
                samesite="none" if self.secure else "lax",
                path="/lti",
            )


class DatabaseLaunchStorage(LaunchDataStorage[Any]):
    """pylti1p3's launch storage kept in the database (app.auth.states), so any web replica
    answers the launch, and a nonce is used once: checking it takes it."""

    _session_cookie_name = ""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self._db = session

    def get_session_cookie_name(self) -> str | None:
        return None  # the values are keyed by state and nonce, not by a browser session

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str) -> Any:
        return states.peek(self._db, self._prepare_key(key))

    def set_value(self, key: str, value: Any, exp: int | None = None) -> None:
        states.put(self._db, self._prepare_key(key), value, seconds=min(exp or 0, STATE_SECONDS))

    def check_value(self, key: str) -> bool:
        # Only the nonce is checked this way: taking it makes a replayed launch fail.
        return states.take(self._db, self._prepare_key(key))


def session_service(session: Session, request: ToolRequest) -> SessionService:
    service = SessionService(request)
    service.set_data_storage(DatabaseLaunchStorage(session))
    service._launch_data_lifetime = STATE_SECONDS
    return service


class DatabaseToolConf(ToolConfAbstract[ToolRequest]):
    """Registrations from `lti_platforms`; `key_sets` are the LMSs' key sets, fetched before
    the database work began (so no request holds a connection while an LMS answers)."""

    def __init__(self, session: Session, key_sets: dict[str, Any] | None = None) -> None:
        self._db = session
        self._key_sets = key_sets or {}

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def check_iss_has_many_clients(self, iss: str) -> bool:
        return True

    def platform(self, iss: str, client_id: str | None) -> LtiPlatform | None:
        """The registration that owns this issuer, if the client id (when given) is its own."""
        platform = self._db.scalar(select(LtiPlatform).where(LtiPlatform.issuer == iss))
        if platform is None or (client_id and client_id != platform.client_id):
            return None
        return platform

    def find_registration_by_issuer(self, iss: str, *args: Any, **kwargs: Any) -> Registration:
        raise NotImplementedError  # check_iss_has_one_client is always False

    # pylti1p3 checks the answer for None ("Registration not found"), as its own configs do.
    def find_registration_by_params(  # type: ignore[override]
        self, iss: str, client_id: str | None, *args: Any, **kwargs: Any
    ) -> Registration | None:
        platform = self.platform(iss, client_id)
        return None if platform is None else registration_of(self._db, platform, self._key_sets)

    def find_deployment(self, iss: str, deployment_id: str) -> Deployment | None:
        raise NotImplementedError

    def find_deployment_by_params(
        self, iss: str, deployment_id: str, client_id: str, *args: Any, **kwargs: Any
    ) -> Deployment | None:
        platform = self.platform(iss, client_id)
        if platform is None or deployment_id not in (platform.deployment_ids or []):
            return None
        return Deployment().set_deployment_id(deployment_id)


def registration_of(
    session: Session, platform: LtiPlatform, key_sets: dict[str, Any] | None = None
) -> Registration:
    """pylti1p3's registration, with the key the tool signs with for this registration."""
    key = signing_key(session, platform=platform)
    registration = (
        Registration()
        .set_issuer(platform.issuer)
        .set_client_id(platform.client_id)
        .set_auth_login_url(platform.auth_login_url)
        .set_auth_token_url(platform.auth_token_url)
        .set_key_set_url(platform.key_set_url)
        .set_tool_private_key(key.private_pem)
        .set_tool_public_key(_public_pem(key.private_pem))
    )
    if platform.auth_audience:
        registration.set_auth_audience(platform.auth_audience)
    # Never empty-handed: pylti1p3 would fetch the key set itself, outside our client.
    registration.set_key_set((key_sets or {}).get(platform.key_set_url) or {"keys": []})  # type: ignore[arg-type]
    return registration


def _public_pem(private_pem: str) -> str:
    from cryptography.hazmat.primitives import serialization

    private = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


class ToolLogin(OIDCLogin[ToolRequest, DatabaseToolConf, SessionService, CookieJar, str]):
    def get_redirect(self, url: str) -> Redirect[str]:
        raise NotImplementedError  # the route answers with the URL itself

    def authorization_url(self, launch_url: str) -> str:
        """Where the browser goes next: the LMS's OIDC endpoint with our state and nonce."""
        return self._prepare_redirect_url(launch_url)


class ToolLaunch(MessageLaunch[ToolRequest, DatabaseToolConf, SessionService, CookieJar]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, requests_session=LmsHttp(), **kwargs)  # type: ignore[arg-type]
        # LTI 1.3 requires both; PyJWT checks them only where present unless told.
        self.set_jwt_verify_options({"verify_aud": False, "require": ["exp", "iat"]})

    def _get_request_param(self, key: str) -> str:
        return self._request.get_param(key)

    @property
    def registration(self) -> Registration:
        assert self._registration is not None
        return self._registration


class LmsAnswer:
    """An LMS's answer as pylti1p3 reads one (a requests.Response, as far as it looks)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers
        self.content = response.content
        self.url = str(response.request.url)

    @property
    def ok(self) -> bool:
        return self._response.is_success

    @property
    def text(self) -> str:
        return self._response.text

    def json(self) -> Any:
        import requests

        try:
            return json.loads(self.content)
        except ValueError as exc:
            raise requests.JSONDecodeError(str(exc), "", 0) from None


class LmsHttp:
    """pylti1p3's HTTP session, over the one outbound client (app.core.outbound)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}

    def _send(self, method: str, url: str, **kwargs: Any) -> LmsAnswer:
        with outbound.client() as http:
            return LmsAnswer(http.request(method, url, **kwargs))

    def get(self, url: str, headers: dict[str, str] | None = None, **_: Any) -> LmsAnswer:
        return self._send("GET", url, headers={**self.headers, **(headers or {})})

    def post(
        self,
        url: str,
        data: Any = None,
        headers: dict[str, str] | None = None,
        **_: Any,
    ) -> LmsAnswer:
        body = {"data": data} if isinstance(data, dict) else {"content": data}
        return self._send("POST", url, headers={**self.headers, **(headers or {})}, **body)


# Access tokens of the LMSs' services, per process, until shortly before they expire.
_tokens: dict[str, tuple[str, float]] = {}
_tokens_lock = threading.Lock()


class CachingServiceConnector(ServiceConnector):
    def __init__(self, registration: Registration) -> None:
        super().__init__(registration, LmsHttp())  # type: ignore[arg-type]

    def _key(self, scope_key: str) -> str:
        r = self._registration
        return f"{r.get_issuer()}|{r.get_client_id()}|{r.get_auth_token_url()}|{scope_key}"

    def _get_cached_access_token(self, scope_key: str) -> str | None:
        with _tokens_lock:
            found = _tokens.get(self._key(scope_key))
        if found and found[1] > time.monotonic():
            return found[0]
        return None

    def _cache_access_token(self, scope_key: str, access_token: str, expires_in: float) -> None:
        with _tokens_lock:
            _tokens[self._key(scope_key)] = (
                access_token,
                time.monotonic() + max(0.0, float(expires_in or 0) - 60),
            )


def forget_tokens() -> None:
    with _tokens_lock:
        _tokens.clear()
