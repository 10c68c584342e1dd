"""A new API token, shown once on the account page that the form's redirect leads to.

The form posts, the token is made, and the browser is sent on to /account (a reload then
reloads the page, not the form, so it makes no second token). Only the token's hash is kept
(app.users.service), so the page it is shown on must get it from somewhere, and no place may
hold it in the clear: not the database, not the URL, not the cookie. So it is split in two: a
random pad of its length waits in the database (app.auth.states, once, for a few minutes), and
the token XOR the pad in the browser's session cookie. Either half alone is noise. The account
page takes the pad once (a conditional write, so two tabs cannot both take it) and blanks it, so
the cookie's half, or a copy of the cookie, opens nothing afterwards.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy.orm import Session

from app.auth import states
from app.auth.models import SignInState

# Long enough to survive a slow redirect, short enough that an unread pad does not linger.
SECONDS = 300
COOKIE_KEY = "new_token"
KEY_PREFIX = "new-token:"


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def hold(session: Session, cookie: dict[str, Any], *, user_id: int, token: str) -> None:
    """Keep a just-made token for the next page of this browser: half here, half in its cookie."""
    raw = token.encode()
    pad = secrets.token_bytes(len(raw))
    key = KEY_PREFIX + secrets.token_urlsafe(24)
    states.put(session, key, {"user_id": user_id, "pad": pad.hex()}, seconds=SECONDS)
    cookie[COOKIE_KEY] = {"key": key, "sealed": _xor(raw, pad).hex()}


def take(session: Session, cookie: dict[str, Any], *, user_id: int) -> str | None:
    """The token held for this browser and account, once; None when there is none (any more)."""
    held = cookie.pop(COOKIE_KEY, None)
    if not isinstance(held, dict):
        return None
    key, sealed = held.get("key"), held.get("sealed")
    if not isinstance(key, str) or not key.startswith(KEY_PREFIX) or not isinstance(sealed, str):
        return None
    data = states.peek(session, key)
    if not isinstance(data, dict) or data.get("user_id") != user_id:
        return None
    if not states.take(session, key):
        return None
    row = session.get(SignInState, key)
    if row is not None:
        row.data = None  # the pad is gone: the cookie's half is noise from now on
    try:
        return _xor(bytes.fromhex(sealed), bytes.fromhex(data["pad"])).decode()
    except (ValueError, KeyError, UnicodeDecodeError):
        return None
