"""SAML 2.0 sign-in as a service provider, with pysaml2.

pysaml2 builds the authentication request (HTTP-Redirect binding) and checks the identity
provider's answer (HTTP-POST binding to /sso/<slug>/saml/acs): the signature (by Debian's
`xmlsec1`, which pysaml2 runs), the audience, the time window, and that it answers a request
of ours. The request's id waits in the database (app.auth.states), not in the login cookie:
the answer is posted from the identity provider's site, and that post carries no cookie.
"""

from __future__ import annotations

import shutil
from typing import Any

from app.auth.problems import SignInRefused
from app.sso.service import ProviderView, urls

# Names in pysaml2's attribute maps (its converters turn urn:oid names into these).
DEFAULT_EMAIL_ATTRIBUTE = "mail"
DEFAULT_NAME_ATTRIBUTE = "displayName"


def xmlsec_binary() -> str:
    found = shutil.which("xmlsec1")
    if not found:
        raise SignInRefused(
            "University sign-in through SAML is not set up on this server; log in with your "
            "password, and tell your course staff.",
            "xmlsec1 is not installed (Debian: apt-get install xmlsec1); pysaml2 needs it to "
            "check signatures",
            kind="saml",
        )
    return found


def client_for(provider: ProviderView) -> Any:
    from saml2 import BINDING_HTTP_POST
    from saml2.client import Saml2Client
    from saml2.config import SPConfig

    where = urls(provider.slug)
    metadata: dict[str, Any] = (
        {"inline": [provider.idp_metadata]}
        if provider.idp_metadata
        else {"remote": [{"url": provider.idp_metadata_url}]}
    )
    config = SPConfig()
    config.load(
        {
            "entityid": where["saml_entity_id"],
            "xmlsec_binary": xmlsec_binary(),
            "metadata": metadata,
            "allow_unknown_attributes": True,
            "service": {
                "sp": {
                    "name": "kernelgrader",
                    "endpoints": {
                        "assertion_consumer_service": [(where["saml_acs"], BINDING_HTTP_POST)]
                    },
                    "allow_unsolicited": False,
                    "authn_requests_signed": False,
                    "want_assertions_signed": True,
                    "want_response_signed": False,
                }
            },
        }
    )
    return Saml2Client(config=config)


def request_url(provider: ProviderView, *, relay_state: str) -> tuple[str, str]:
    """The identity provider's URL for a new authentication request, and the request's id."""
    from saml2 import BINDING_HTTP_REDIRECT

    client = client_for(provider)
    request_id, info = client.prepare_for_authenticate(
        relay_state=relay_state, binding=BINDING_HTTP_REDIRECT
    )
    location = dict(info["headers"])["Location"]
    return str(location), str(request_id)


def read_answer(
    provider: ProviderView, *, saml_response: str, request_id: str
) -> tuple[str, str, dict[str, Any]]:
    """The checked answer's NameID, issuer and attributes (lists, by friendly name)."""
    from saml2 import BINDING_HTTP_POST

    client = client_for(provider)
    try:
        answer = client.parse_authn_request_response(
            saml_response, BINDING_HTTP_POST, outstanding={request_id: "/"}
        )
    except Exception as exc:
        raise SignInRefused(
            f"The answer from {provider.name} could not be accepted, so you were not signed "
            "in; try again, and tell your course staff if it keeps happening.",
            f"saml provider {provider.slug}: {type(exc).__name__}: {exc}",
            kind="saml",
            source=provider.slug,
        ) from None
    if answer is None:
        raise SignInRefused(
            f"The answer from {provider.name} was empty, so you were not signed in; try again.",
            f"saml provider {provider.slug}: no response parsed",
            kind="saml",
            source=provider.slug,
        )
    name_id = answer.name_id.text if answer.name_id is not None else ""
    return str(name_id or ""), str(answer.issuer() or ""), dict(answer.ava or {})


def sp_metadata(provider: ProviderView) -> str:
    from saml2.metadata import create_metadata_string

    client = client_for(provider)
    return create_metadata_string(None, config=client.config, valid=24 * 7).decode()  # type: ignore[no-any-return]
