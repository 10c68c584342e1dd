"""Sending profiling jobs to the broker, once the rows they name are committed."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import update

from app.core.database import session_scope
from app.profiling.models import KernelProfile, ProfileState

log = logging.getLogger(__name__)

PROFILE_TASK = "profiling.profile"


def send_profile(*, profile_id: int, queue: str, stamped_at: datetime) -> bool:
    """Put a profiling job on its GPU queue; False (logged, the stamp taken back so the next
    sweep sends it again) when the broker refuses it."""
    from app.jobs.celery_app import celery_app

    try:
        celery_app.send_task(
            PROFILE_TASK,
            args=[profile_id],
            kwargs={"sent_at": stamped_at.isoformat(), "queue": queue},
            queue=queue,
        )
    except Exception:
        log.exception("could not send profiling job %s; the sweep sends it again", profile_id)
        try:
            with session_scope() as session:
                session.execute(
                    update(KernelProfile)
                    .where(
                        KernelProfile.id == profile_id,
                        KernelProfile.state == ProfileState.queued.value,
                        KernelProfile.sent_at == stamped_at,
                    )
                    .values(sent_at=None)
                )
        except Exception:
            log.exception("profiling job %s: its failed send could not be noted", profile_id)
        return False
    return True
