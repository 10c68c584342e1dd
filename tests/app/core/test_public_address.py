"""The public address an LMS or identity provider is given: https, to a host not this machine."""

from __future__ import annotations

import pytest

from app.core.public_address import public_address_problem

HTTP = "it is plain http"
HERE = "is this machine itself"


@pytest.mark.parametrize(
    ("url", "problems"),
    [
        ("https://kernelgrader.example.edu", []),
        ("https://kernelgrader.example.edu:8443/grader", []),
        ("https://10.1.2.3", []),  # a campus LMS may reach a private address
        ("https://localhostess.example", []),
        ("http://kernelgrader.example.edu", [HTTP]),
        ("http://localhost:8000", [HTTP, HERE]),
        ("https://localhost", [HERE]),
        ("https://grader.localhost", [HERE]),
        ("https://127.0.0.1:8000", [HERE]),
        ("https://127.8.9.10", [HERE]),
        ("https://[::1]:8443", [HERE]),
        ("https://0.0.0.0", [HERE]),
        ("https://", [HERE]),
    ],
)
def test_an_address_an_lms_cannot_use_is_named_with_why(url: str, problems: list[str]) -> None:
    sentence = public_address_problem(url)
    assert [p for p in (HTTP, HERE) if p in sentence] == problems
    if problems:
        assert sentence.startswith(f"This server's public address is {url} (KERNELGRADER_PUBLIC")
        assert "Set KERNELGRADER_PUBLIC_URL to the public https address" in sentence
    else:
        assert sentence == ""
