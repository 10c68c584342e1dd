"""What each LMS calls its LTI 1.3 values, and where they are: one source for the
registration page's hints and the README's per-LMS sections (tests/app/lti/test_readme.py
checks that the README says the same, and registers a platform with these values).

`{site}` stands for the LMS's own address (Moodle, D2L), `{client_id}` for the client id the
LMS gave kernelgrader (Blackboard's key set URL holds it). Canvas's cloud endpoints are the
same for every school.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LmsValues:
    key: str
    name: str
    issuer: str
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    auth_audience: str = ""
    # Where in the LMS its administrator enters kernelgrader's URLs.
    where: str = ""


LMSS: tuple[LmsValues, ...] = (
    LmsValues(
        key="canvas",
        name="Canvas",
        issuer="https://canvas.instructure.com",
        auth_login_url="https://sso.canvaslms.com/api/lti/authorize_redirect",
        auth_token_url="https://sso.canvaslms.com/login/oauth2/token",
        key_set_url="https://sso.canvaslms.com/api/lti/security/jwks",
        where="Admin > Developer Keys > + Developer Key > LTI Key",
    ),
    LmsValues(
        key="moodle",
        name="Moodle",
        issuer="{site}",
        auth_login_url="{site}/mod/lti/auth.php",
        auth_token_url="{site}/mod/lti/token.php",
        key_set_url="{site}/mod/lti/certs.php",
        where="Site administration > Plugins > Activity modules > External tool > "
        "Manage tools > configure a tool manually",
    ),
    LmsValues(
        key="blackboard",
        name="Blackboard Learn",
        issuer="https://blackboard.com",
        auth_login_url="https://developer.blackboard.com/api/v1/gateway/oidcauth",
        auth_token_url="https://developer.blackboard.com/api/v1/gateway/oauth2/jwttoken",
        key_set_url="https://developer.blackboard.com/api/v1/management/applications/"
        "{client_id}/jwks.json",
        where="developer.blackboard.com > My Apps > register an LTI 1.3 tool; then "
        "Administrator Panel > LTI Tool Providers > Register LTI 1.3/Advantage Tool",
    ),
    LmsValues(
        key="d2l",
        name="D2L Brightspace",
        issuer="{site}",
        auth_login_url="{site}/d2l/lti/authenticate",
        auth_token_url="https://auth.brightspace.com/core/connect/token",
        key_set_url="{site}/d2l/.well-known/jwks",
        auth_audience="https://api.brightspace.com/auth/token",
        where="Admin Tools > Manage Extensibility > LTI Advantage > Register Tool",
    ),
)
