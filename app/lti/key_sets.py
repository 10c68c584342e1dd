"""The LMSs' key sets, fetched by the web process (through app.core.outbound) to check
launches, and kept per process.

A launch is posted by anyone's browser, unauthenticated; only a registration's own key set
URL (typed by a site administrator) is ever fetched for it, and a key id the kept set lacks
fetches that set again at most once per `REFETCH_SECONDS`, however many launches name new
ones: a stream of forged launches costs the LMS one request per interval, not one each.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from typing import Any

from app.core import outbound

# A kept key set is fetched again after this long.
KEY_SET_SECONDS = 600
# At most one fetch of one key set this often (an unknown key id, or one that failed).
REFETCH_SECONDS = 10.0
MAX_KEY_SET_BYTES = 256 * 1024


@dataclass
class _Kept:
    keys: dict[str, Any] | None
    fetched_at: float  # of the last attempt, kept or failed
    failure: str = ""


_kept: dict[str, _Kept] = {}
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


class KeySetUnavailable(Exception):
    """The key set could not be read: `reason` is ours (app.core.outbound.reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _lock(url: str) -> asyncio.Lock:
    per_loop = _locks.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault(url, asyncio.Lock())


def _has(keys: dict[str, Any] | None, kid: str) -> bool:
    return keys is not None and any(key.get("kid") == kid for key in keys.get("keys", []))


async def key_set(url: str, kid: str) -> dict[str, Any]:
    """The key set at `url`, fetched if not kept, stale, or (at most once per interval)
    lacking `kid`."""
    async with _lock(url):
        kept = _kept.get(url)
        now = time.monotonic()
        if kept is not None and kept.keys is not None:
            fresh = now - kept.fetched_at < KEY_SET_SECONDS
            if fresh and (_has(kept.keys, kid) or now - kept.fetched_at < REFETCH_SECONDS):
                return kept.keys  # pylti1p3 refuses a key id it does not find
        elif kept is not None and now - kept.fetched_at < REFETCH_SECONDS:
            raise KeySetUnavailable(kept.failure)
        try:
            found = await _fetch(url)
        except Exception as exc:
            reason = outbound.reason(exc)
            _kept[url] = _Kept(keys=kept.keys if kept else None, fetched_at=now, failure=reason)
            if kept is not None and kept.keys is not None:
                return kept.keys  # the LMS is away: the keys it had still check
            raise KeySetUnavailable(reason) from None
        _kept[url] = _Kept(keys=found, fetched_at=now)
        return found


async def _fetch(url: str) -> dict[str, Any]:
    async with outbound.async_client(max_bytes=MAX_KEY_SET_BYTES) as http:
        answer = await http.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        found = answer.json()
    if not isinstance(found, dict) or not isinstance(found.get("keys"), list):
        raise ValueError("not a key set")
    return found


def forget() -> None:
    _kept.clear()
