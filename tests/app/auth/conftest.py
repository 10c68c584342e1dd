"""The service on loopback and the httpx browser, shared with the LTI tests."""

from tests.app.lti.conftest import browser, browsers, lms, tool

__all__ = ["browser", "browsers", "lms", "tool"]
