"""A GPU worker's side of one profiling job: claim it, profile, record.

Held as every background job is (app.jobs.lease): each phase opens its own short transaction,
and a worker that dies leaves a job whose heartbeat goes stale, which the sweep queues again.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from app.core.database import session_scope, utcnow
from app.core.overload import database_unavailable
from app.core.settings import get_settings
from app.courses.models import Lab
from app.courses.specs import spec_for
from app.jobs.gpu_probe import worker_arch, worker_gpu
from app.jobs.workers import worker_id
from app.profiling.models import PROFILES, KernelProfile, ProfileState
from app.profiling.service import kept_reference_profiles, record_profile
from app.submissions.models import Submission
from app.submissions.service import compile_name
from graders.profile.tool import YIELDED

log = logging.getLogger(__name__)

FAILED_ON_OUR_SIDE = (
    "Profiling stopped because of a problem on our side, not because of your code; the "
    "course staff can ask for it again."
)


def _claim(profile_id: int, me: str) -> bool:
    settings = get_settings()
    now = utcnow()
    with session_scope() as session:
        return PROFILES.claim(
            session,
            profile_id,
            now=now,
            me=me,
            stale_before=now - timedelta(seconds=settings.heartbeat_timeout_seconds),
            max_attempts=settings.max_attempts,
        )


def profile_job(profile_id: int, *, me: str | None = None) -> str:
    """Profile one job; a second delivery, or one another worker holds, does nothing."""
    me = me or worker_id()
    if not _claim(profile_id, me):
        return "duplicate"
    settings = get_settings()
    with PROFILES.heartbeat(
        profile_id,
        me,
        every_seconds=settings.heartbeat_seconds,
        name=f"profile-heartbeat-{profile_id}",
    ):
        try:
            return _profile_held(profile_id, me)
        except Exception as exc:
            if database_unavailable(exc):
                log.warning("profiling job %s: the database is away (%s)", profile_id, exc)
                raise
            log.exception("profiling job %s failed", profile_id)
            _fail(profile_id, me, f"{type(exc).__name__}: {exc}")
            return "error"


def _profile_held(profile_id: int, me: str) -> str:
    from graders.profile.stage import profile_submission
    from graders.run.inputs import case_seed

    settings = get_settings()
    with session_scope() as session:
        profile = session.get_one(KernelProfile, profile_id)
        submission = session.get_one(Submission, profile.submission_id)
        lab = session.get_one(Lab, submission.lab_id)
        source, filename = submission.source_text, submission.filename
    spec = spec_for(lab)
    case = spec.profile_case
    gpu, _driver = worker_gpu()
    with session_scope() as session:
        kept = kept_reference_profiles(session, gpu=gpu, digest=spec.digest, case=case.name)
    missing = [r.name for r in spec.references if r.file and r.name not in kept]
    result = profile_submission(
        spec,
        source,
        seed=case_seed(spec.id, case.name, hidden=case.hidden, secret=settings.grading_secret),
        filename=compile_name(filename),
        arch=worker_arch(),
        references=missing,
        timeout_s=settings.profile_timeout_seconds,
        yield_to_timing=True,
    )
    for line in result.log:
        log.info("profiling job %s: %s", profile_id, line)
    with session_scope() as session:
        if not PROFILES.hold(session, profile_id, me):
            return "lost"
        profile = session.get_one(KernelProfile, profile_id)
        if result.status == YIELDED:
            # A grading's timed section came: the profile let go of the GPU. It goes back in
            # its place in the queue, the attempt not counted; the sweep sends it again once
            # no grading waits.
            log.info("profiling job %s: %s", profile_id, result.message)
            profile.state = ProfileState.queued.value
            profile.worker_id = None
            profile.sent_at = None
            profile.attempt = max(0, profile.attempt - 1)
            return "yielded"
        profile.lab_digest = spec.digest
        record_profile(session, profile=profile, result=result, gpu=gpu, now=utcnow())
        return profile.state


def _fail(profile_id: int, me: str, error: str) -> None:
    """Our side failed: queued again (held back, the sweep sends it) while attempts remain."""
    settings = get_settings()
    with session_scope() as session:
        if not PROFILES.hold(session, profile_id, me):
            return
        profile = session.get_one(KernelProfile, profile_id)
        profile.error = error[:4000]
        if profile.attempt >= settings.max_attempts:
            profile.state = ProfileState.failed.value
            profile.finished_at = utcnow()
            profile.message = FAILED_ON_OUR_SIDE
            return
        profile.state = ProfileState.queued.value
        profile.worker_id = None
        profile.sent_at = None
        profile.queued_at = utcnow()
