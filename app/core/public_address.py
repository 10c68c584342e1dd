"""Whether the server's public address (KERNELGRADER_PUBLIC_URL) can work for an LMS or an
identity provider, which reach kernelgrader from outside and only over https."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

SETTING = "KERNELGRADER_PUBLIC_URL"


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def public_address_problem(url: str) -> str:
    """A sentence on why an LMS or identity provider cannot use this address ("" when it
    can, as far as the address alone tells: https to a host that is not this machine)."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    problems = []
    if parts.scheme != "https":
        problems.append(
            f"it is plain {parts.scheme or 'text'}, and an LMS or identity provider needs https"
        )
    if not host or _loopback(host):
        problems.append(
            f"{host or 'it names no host'} is this machine itself, which no LMS or identity "
            "provider can reach"
        )
    if not problems:
        return ""
    return (
        f"This server's public address is {url} ({SETTING}): {'; and '.join(problems)}. The "
        "addresses below start with it, so they will not work in an LMS or at an identity "
        f"provider as they stand. Set {SETTING} to the public https address people use (e.g. "
        "https://kernelgrader.example.edu) and restart the server."
    )
