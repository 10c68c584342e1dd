""" "Forgot password" in two steps, so that its answer tells nobody who has an account.

The request checks only the address's form and its throttles, hands the address to this
process's reset thread and answers: it reads no table and writes none, whatever the address,
so its answer and its time are the same for an address with an account as for one without,
by construction rather than by padding. The thread looks the address up in a transaction of
its own and, for an account, makes a reset link (kind `reset`, which retires older reset links
only: an invite the course staff made stays) and hands the mail to the outbox once the link is
committed. An address still waiting here when the process ends is lost; the person asks again.
"""

from __future__ import annotations

import logging
import queue
import threading

from app.core.database import session_scope, utcnow
from app.core.mail import outbox
from app.core.settings import get_settings
from app.core.timefmt import when_text
from app.users.invites import issue_invite
from app.users.models import InviteKind
from app.users.service import find_user

log = logging.getLogger(__name__)

SUBJECT = "Set a new kernelgrader password"


class ResetRequests:
    """Addresses waiting for the reset thread, which starts with the first one."""

    def __init__(self, *, capacity: int = 1000) -> None:
        self._queue: queue.Queue[str] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ask(self, address: str) -> None:
        """Hand over a normalized address; the same few steps whatever it is."""
        try:
            self._queue.put_nowait(address)
        except queue.Full:
            log.error("reset request for %s dropped: %d already wait", address, self._queue.qsize())
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="kernelgrader-resets", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            address = self._queue.get()
            try:
                mail_reset_link(address)
            except Exception:
                log.exception("reset request for %s failed; the person can ask again", address)
            finally:
                self._queue.task_done()

    def wait_until_done(self) -> None:
        """For tests: block until every address handed over was looked up (and mailed)."""
        self._queue.join()


def mail_reset_link(address: str) -> bool:
    """Mail a reset link to the account with this address, if there is one."""
    minutes = get_settings().password_reset_minutes
    with session_scope() as session:
        user = find_user(session, email=address)
        if user is None:
            return False
        issued = issue_invite(
            session, user=user, now=utcnow(), days=minutes / (24 * 60), kind=InviteKind.reset
        )
        to, body = (
            user.email,
            f"Someone, probably you, asked for a new password for the kernelgrader account "
            f"{user.email}.\n\nChoose one with this link; it works once, until "
            f"{when_text(issued.expires_at)}:\n\n{issued.url}\n\nSetting a new password signs "
            "you out everywhere else and revokes your API tokens. If it was not you, ignore "
            "this mail: your password stays as it is.\n",
        )
    outbox.send(to=to, subject=SUBJECT, body=body)
    return True


reset_requests = ResetRequests()
