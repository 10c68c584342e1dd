"""Every request kernelgrader makes to another server (an LMS's key set, tokens, roster, grade
columns and scores; an OpenID provider's discovery document, key set and token endpoint) goes
through the httpx transports here.

The addresses in those requests are typed by people (a site administrator registering an
LMS), or sent by an LMS in a launch (its roster and grade-column URLs), so the web process
must not become a way to reach what only it can reach. Each request:

- goes to `https` only; plain `http` only to a loopback address, and only where
  KERNELGRADER_ENV is development or test (the tests' LMS and OpenID provider live there);
- has its host resolved first, and is refused if any address it resolves to is private,
  loopback (outside development and test), link-local, multicast, reserved or otherwise not
  public; the connection then goes to the address that was checked (the TLS name stays the
  host's), so a second, different DNS answer cannot swap it;
- follows no redirect (a 3xx answer is refused), uses no proxy from the environment, ends
  within a short time, and reads at most a bounded body, uncompressed;
- fails with `OutboundRefused`, whose sentence is ours; what the other server answered is
  never shown beyond its status line (`status_line`).
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import time
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import anyio
import httpx

from app.core.settings import get_settings

# Connect, read a chunk, write; and the whole answer, however slowly it drips in.
TIMEOUT = httpx.Timeout(connect=5.0, read=10.0, write=10.0, pool=5.0)
TOTAL_SECONDS = 20.0
# A roster page of a large course is a few hundred KiB; a key set or discovery document, a few.
MAX_BODY_BYTES = 4 * 1024 * 1024
USER_AGENT = "kernelgrader"


class OutboundRefused(Exception):
    """A request that was not made, or whose answer was not read: our sentence only."""


def _loopback_allowed() -> bool:
    return get_settings().env in ("development", "test")


def _address_refused(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why this address may not be reached ("" if it may)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            return _address_refused(inner)
    if ip.is_loopback:
        return "" if _loopback_allowed() else "a loopback address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:  # shared (carrier-grade NAT), documentation, benchmarking ranges
        return "a reserved address"
    return ""


def _resolve(host: str, port: int) -> list[str]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise OutboundRefused(f"the host {host} could not be found") from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def _checked(url: Any, addresses: list[str]) -> str:
    """The address to connect to, once every address of the host passed."""
    host = url.host
    if not addresses:
        raise OutboundRefused(f"the host {host} could not be found")
    loopback = True
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        why = _address_refused(ip)
        if why:
            raise OutboundRefused(f"{host} is {why} ({ip}), which kernelgrader does not connect to")
        loopback = loopback and ip.is_loopback
    if url.scheme == "http" and not loopback:
        raise OutboundRefused(f"{url.host} was given with http://; only https:// is used")
    return addresses[0]


def _check_url(url: Any) -> None:
    if url.scheme == "http":
        if not _loopback_allowed():
            raise OutboundRefused(f"{url.host} was given with http://; only https:// is used")
    elif url.scheme != "https":
        raise OutboundRefused(f"'{url.scheme or url}' is not an https:// address")
    if not url.host:
        raise OutboundRefused("the address names no host")
    if url.userinfo:
        raise OutboundRefused("an address with a user name or password in it is not fetched")


def _pin(request: Any, address: str) -> None:
    """Connect to the checked address; the Host header and TLS name stay the host's."""
    host = request.url.host
    extensions = dict(request.extensions)
    timeout = extensions.get("timeout") or {}
    # A library's client may leave a step without a limit: ours applies there.
    extensions["timeout"] = {
        step: timeout.get(step) or limit for step, limit in TIMEOUT.as_dict().items()
    }
    if request.url.scheme == "https":
        extensions["sni_hostname"] = host
    request.extensions = extensions
    request.url = request.url.copy_with(host=address)
    # The body is counted as it arrives; a compressed one could grow past the bound after.
    request.headers["Accept-Encoding"] = "identity"


def _check_answer(response: Any, limit: int) -> None:
    if 300 <= response.status_code < 400:
        raise OutboundRefused(
            f"the server answered with a redirect ({status_line(response)}), which "
            "kernelgrader does not follow; register the address it ends at"
        )
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise OutboundRefused(f"the answer came compressed ({encoding[:20]}), which was not asked")
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise OutboundRefused(f"the answer is larger than {limit // 1024} KiB")


# A connection of its own per request: one kept for reuse would be keyed by the address, and
# two hosts behind one address must not share one made (and TLS-checked) for the other. So
# the transports below hold nothing between requests, and a library that closes its client
# after each use (Authlib does) may use one again.
_PER_REQUEST: dict[str, Any] = {"retries": 0, "trust_env": False}


def _counted(total: int, chunk: bytes, limit: int, deadline: float) -> int:
    """The bytes read so far with this chunk; refused past the size or the time allowed."""
    total += len(chunk)
    if total > limit:
        raise OutboundRefused(f"the answer is larger than {limit // 1024} KiB")
    if time.monotonic() > deadline:
        raise OutboundRefused(f"the answer took longer than {TOTAL_SECONDS:g} s")
    return total


@functools.cache
def transports(http: ModuleType) -> tuple[type, type]:
    """The guarded (synchronous, asynchronous) transports for `http`: httpx, or httpx2 (the
    fork Authlib's client is built on), whose classes are the same but not shared."""

    class Bounded(http.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, response: Any, inner: Any, limit: int) -> None:
            self._response, self._inner, self._limit = response, inner, limit
            self._deadline = time.monotonic() + TOTAL_SECONDS

        def __iter__(self) -> Iterator[bytes]:
            total = 0
            for chunk in self._response.stream:
                total = _counted(total, chunk, self._limit, self._deadline)
                yield chunk

        def close(self) -> None:
            try:
                self._response.close()
            finally:
                self._inner.close()

    class AsyncBounded(http.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, response: Any, inner: Any, limit: int) -> None:
            self._response, self._inner, self._limit = response, inner, limit
            self._deadline = time.monotonic() + TOTAL_SECONDS

        async def __aiter__(self) -> AsyncIterator[bytes]:
            total = 0
            async for chunk in self._response.stream:
                total = _counted(total, chunk, self._limit, self._deadline)
                yield chunk

        async def aclose(self) -> None:
            try:
                await self._response.aclose()
            finally:
                await self._inner.aclose()

    class Guarded(http.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, *, max_bytes: int = MAX_BODY_BYTES) -> None:
            self._limit = max_bytes

        def handle_request(self, request: Any) -> Any:
            _check_url(request.url)
            address = _checked(request.url, _resolve(request.url.host, _port(request.url)))
            _pin(request, address)
            inner = http.HTTPTransport(**_PER_REQUEST)
            try:
                response = inner.handle_request(request)
                _check_answer(response, self._limit)
            except BaseException:
                inner.close()
                raise
            return http.Response(
                response.status_code,
                headers=response.headers,
                stream=Bounded(response, inner, self._limit),
                extensions=response.extensions,
            )

    class AsyncGuarded(http.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, *, max_bytes: int = MAX_BODY_BYTES) -> None:
            self._limit = max_bytes

        async def handle_async_request(self, request: Any) -> Any:
            _check_url(request.url)
            host, port = request.url.host, _port(request.url)
            address = _checked(request.url, await anyio.to_thread.run_sync(_resolve, host, port))
            _pin(request, address)
            inner = http.AsyncHTTPTransport(**_PER_REQUEST)
            try:
                response = await inner.handle_async_request(request)
                _check_answer(response, self._limit)
            except BaseException:
                await inner.aclose()
                raise
            return http.Response(
                response.status_code,
                headers=response.headers,
                stream=AsyncBounded(response, inner, self._limit),
                extensions=response.extensions,
            )

    return Guarded, AsyncGuarded


def _port(url: Any) -> int:
    return int(url.port or (443 if url.scheme == "https" else 80))


def client_options(
    *, max_bytes: int = MAX_BODY_BYTES, asynchronous: bool, http: ModuleType = httpx
) -> dict[str, Any]:
    """What a client of `http` (ours, or one a library makes) is built with."""
    sync, asynchronous_ = transports(http)
    transport = (asynchronous_ if asynchronous else sync)(max_bytes=max_bytes)
    return {
        "transport": transport,
        "timeout": http.Timeout(**TIMEOUT.as_dict()),
        "follow_redirects": False,
        "trust_env": False,
        "headers": {"User-Agent": USER_AGENT},
    }


def client(*, max_bytes: int = MAX_BODY_BYTES) -> httpx.Client:
    return httpx.Client(**client_options(max_bytes=max_bytes, asynchronous=False))


def async_client(*, max_bytes: int = MAX_BODY_BYTES) -> httpx.AsyncClient:
    return httpx.AsyncClient(**client_options(max_bytes=max_bytes, asynchronous=True))


def status_line(response: Any) -> str:
    """`HTTP 422 Unprocessable Entity`: all of another server's answer anyone is shown."""
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return "an answer without a status"
    try:
        phrase = httpx.codes.get_reason_phrase(status)
    except ValueError:
        phrase = ""
    return f"HTTP {status}{' ' + phrase if phrase else ''}"


def reason(exc: BaseException) -> str:
    """What went wrong with a request, in our words: the status line of an answer, or which
    check or network step failed; never text the other server sent."""
    response = getattr(exc, "response", None)
    if response is not None and isinstance(getattr(response, "status_code", None), int):
        return status_line(response)
    if isinstance(exc, OutboundRefused):
        return str(exc)
    names = {kind.__name__ for kind in type(exc).__mro__}  # httpx's or httpx2's
    if "TimeoutException" in names:
        return "the server did not answer in time"
    if "ConnectError" in names:
        return "the server could not be reached"
    if "HTTPError" in names:
        return "the connection failed"
    if isinstance(exc, ValueError):  # JSON that does not parse, a missing field
        return "the answer was not what the protocol asks for"
    return f"the request failed ({type(exc).__name__})"
