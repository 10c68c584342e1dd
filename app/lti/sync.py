"""The workers' LTI thread: rosters that launches asked for, and scores waiting to be sent.

Every worker runs one; claims in the database keep two workers from doing one thing twice.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import select

from app.auth.pages import installed
from app.auth.states import forget_expired
from app.core.database import session_scope
from app.lti.models import LtiPlatform

log = logging.getLogger(__name__)

EVERY_SECONDS = 10.0


def sync_once() -> None:
    with session_scope() as session:
        forget_expired(session)
        registered = session.scalar(select(LtiPlatform.id).limit(1)) is not None
    if not registered:
        return  # no LMS here: the LTI library is not even imported
    # Here, not at the top: they load pylti1p3 (the `sso` extra), and a worker installed
    # without it imports this module and must start (the Docker worker image has no extra).
    from app.lti.grades import send_due_scores
    from app.lti.roster import sync_wanted_rosters

    for sentence in sync_wanted_rosters():
        log.info("LTI roster: %s", sentence)
    report = send_due_scores()
    if report:
        log.info("LTI scores: %s", report)


class LtiSyncThread(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="kernelgrader-lti", daemon=True)
        self.stopped = threading.Event()

    def run(self) -> None:
        if not installed():
            log.info("LTI grade sync is off: kernelgrader[sso] is not installed here.")
            return
        while not self.stopped.wait(EVERY_SECONDS):
            try:
                sync_once()
            except Exception:
                log.exception("LTI sync failed; trying again in %s s", EVERY_SECONDS)
