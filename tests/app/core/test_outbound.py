"""The one outbound client (app.core.outbound), against servers on loopback (issue 31,
class 6): in production it reaches no loopback, private, link-local, multicast or reserved
address and speaks https only; it follows no redirect, reads a bounded, uncompressed body, and
tells what went wrong without a word of the other server's answer."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from app.core import outbound
from app.core.outbound import OutboundRefused
from tests.app.lti.conftest import production  # noqa: F401 (a fixture)
from tests.app.lti.platform import ServerThread

SECRET = "db-password=hunter2 at /srv/app/settings.py line 12"


class Target:
    """A server that counts what reaches it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.server = ServerThread(
            Starlette(
                routes=[
                    Route("/ok", self._ok),
                    Route("/redirect", self._redirect),
                    Route("/big", self._big),
                    Route("/stream", self._stream),
                    Route("/gzip", self._gzip),
                    Route("/fails", self._fails),
                ]
            )
        )
        self.base = self.server.base

    async def _ok(self, request: Request) -> Response:
        self.hits.append("/ok")
        return JSONResponse({"keys": []})

    async def _redirect(self, request: Request) -> Response:
        self.hits.append("/redirect")
        return RedirectResponse(f"{self.base}/ok", status_code=302)

    async def _big(self, request: Request) -> Response:
        self.hits.append("/big")
        return Response(b"x" * (outbound.MAX_BODY_BYTES + 1), media_type="application/json")

    async def _stream(self, request: Request) -> Response:
        """A body with no length given, larger than the bound, sent in pieces."""
        self.hits.append("/stream")

        async def pieces():  # type: ignore[no-untyped-def]
            for _ in range(64):
                yield b"y" * 1024

        return StreamingResponse(pieces(), media_type="application/json")

    async def _gzip(self, request: Request) -> Response:
        self.hits.append("/gzip")
        body = gzip.compress(b"z" * (1 << 20))  # a megabyte in a kilobyte
        return Response(body, headers={"Content-Encoding": "gzip"})

    async def _fails(self, request: Request) -> Response:
        self.hits.append("/fails")
        return Response(f"Traceback ... {SECRET}", status_code=500)


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    made = Target()
    with made.server:
        yield made


def _refused(url: str) -> str:
    with outbound.client() as http, pytest.raises(OutboundRefused) as refused:
        http.get(url)
    return str(refused.value)


@pytest.mark.usefixtures("production")
def test_in_production_loopback_and_plain_http_are_not_reached(target: Target) -> None:
    port = target.server.port
    assert "only https:// is used" in _refused(f"http://127.0.0.1:{port}/ok")
    assert "is a loopback address (127.0.0.1)" in _refused(f"https://127.0.0.1:{port}/ok")
    # A name is resolved first, and judged by every address it has.
    assert "localhost is a loopback address" in _refused(f"https://localhost:{port}/ok")
    assert target.hits == []  # nothing was ever sent


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://10.20.30.40/", "a private address"),
        ("https://192.168.1.1/", "a private address"),
        ("https://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("https://[fe80::1]/", "a link-local address"),
        ("https://224.0.0.251/", "a multicast address"),
        ("https://0.0.0.0/", "an unspecified address"),
        ("https://240.0.0.1/", "a reserved address"),
        ("https://100.64.0.1/", "a reserved address"),  # carrier-grade NAT
        ("https://[::ffff:127.0.0.1]/", "a loopback address"),  # IPv4 in IPv6
        ("https://[::1]/", "a loopback address"),
    ],
)
@pytest.mark.usefixtures("production")
def test_in_production_no_internal_address_is_reached(url: str, why: str) -> None:
    assert why in _refused(url)


@pytest.mark.usefixtures("production")
def test_other_schemes_and_credentials_in_the_address_are_refused() -> None:
    assert "'ftp' is not an https:// address" in _refused("ftp://example.edu/keys")
    assert "is not an https:// address" in _refused("file:///etc/passwd")
    assert "user name or password" in _refused("https://admin:pw@example.edu/")


@pytest.mark.usefixtures("production")
def test_the_asynchronous_client_checks_the_same(target: Target) -> None:
    async def fetch() -> str:
        async with outbound.async_client() as http:
            with pytest.raises(OutboundRefused) as refused:
                await http.get(f"https://127.0.0.1:{target.server.port}/ok")
        return str(refused.value)

    assert "loopback address" in asyncio.run(fetch())
    assert target.hits == []


def test_in_test_loopback_http_works_but_no_redirect_is_followed(target: Target) -> None:
    target.hits.clear()
    with outbound.client() as http:
        assert http.get(f"{target.base}/ok").json() == {"keys": []}
    assert "answered with a redirect (HTTP 302 Found)" in _refused(f"{target.base}/redirect")
    assert target.hits == ["/ok", "/redirect"]  # the redirect's target was not asked


def test_bodies_are_bounded_and_read_uncompressed(target: Target) -> None:
    assert "larger than 4096 KiB" in _refused(f"{target.base}/big")
    with outbound.client(max_bytes=16 * 1024) as http, pytest.raises(OutboundRefused) as refused:
        http.get(f"{target.base}/stream")  # no Content-Length: counted as it arrives
    assert "larger than 16 KiB" in str(refused.value)
    assert "came compressed (gzip)" in _refused(f"{target.base}/gzip")


def test_what_went_wrong_is_told_without_the_servers_words(target: Target) -> None:
    with outbound.client() as http:
        answer = http.get(f"{target.base}/fails")
        with pytest.raises(httpx.HTTPStatusError) as failed:
            answer.raise_for_status()
    said = outbound.reason(failed.value)
    assert said == "HTTP 500 Internal Server Error"
    assert "hunter2" not in said
    with outbound.client() as http, pytest.raises(httpx.ConnectError) as down:
        http.get(f"http://127.0.0.1:{_closed_port()}/")
    assert outbound.reason(down.value) == "the server could not be reached"


def _closed_port() -> int:
    from tests.app.lti.platform import free_port

    return free_port()  # free: nothing listens there


def test_in_test_plain_http_reaches_loopback_only() -> None:
    # A public address (nothing is sent: the check comes before any connection).
    assert "only https:// is used" in _refused("http://93.184.216.34/")
