"""When API tokens were last used: noted outside every request's transaction, rarely.

A request only tells the recorder in memory; a background thread writes what it was told every
few seconds in one short transaction of its own. A token's time is written at most once a
minute, so a client polling its results makes no writes, and a request never holds the
database's write lock (SQLite) or a row lock (PostgreSQL) for this.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from sqlalchemy import or_, update

from app.core.database import session_scope
from app.users.models import ApiToken

log = logging.getLogger(__name__)

NOTE_EVERY = timedelta(minutes=1)


class TokenUseRecorder:
    def __init__(self, *, flush_seconds: float = 5.0) -> None:
        self.flush_seconds = flush_seconds
        self._pending: dict[int, datetime] = {}
        # token id -> monotonic time it was last handed to the writer by this process
        self._noted: dict[int, float] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def note(self, token_id: int, *, last_used_at: datetime | None, now: datetime) -> None:
        """Remember that the token was used now, unless its time is under a minute old."""
        if last_used_at is not None and now - last_used_at < NOTE_EVERY:
            return
        tick = time.monotonic()
        with self._lock:
            noted = self._noted.get(token_id)
            if noted is not None and tick - noted < NOTE_EVERY.total_seconds():
                return
            self._noted[token_id] = tick
            self._pending[token_id] = now
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="kernelgrader-token-use", daemon=True
                )
                self._thread.start()

    def flush(self) -> int:
        """Write what was noted, in one transaction; return how many tokens it touched."""
        with self._lock:
            pending, self._pending = self._pending, {}
            horizon = time.monotonic() - NOTE_EVERY.total_seconds()
            self._noted = {k: v for k, v in self._noted.items() if v > horizon}
        if not pending:
            return 0
        try:
            with session_scope() as session:
                for token_id, at in pending.items():
                    session.execute(
                        update(ApiToken)
                        .where(
                            ApiToken.id == token_id,
                            or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < at),
                        )
                        .values(last_used_at=at)
                    )
        except Exception:
            # Only a note: keep it for the next round rather than fail anything.
            log.warning("could not note %d token uses; trying again later", len(pending))
            with self._lock:
                for token_id, at in pending.items():
                    self._pending.setdefault(token_id, at)
            return 0
        return len(pending)

    def _run(self) -> None:
        while True:
            time.sleep(self.flush_seconds)
            self.flush()


token_uses = TokenUseRecorder()
