"""A worker that lost its job while it worked must not record over the worker that took it."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.grading import worker
from app.grading.models import KeptProgram
from app.grading.sweeper import sweep
from app.grading.worker import Outcome, grade_job
from app.submissions.models import GradingJob, JobState, Status, Submission
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission, upload

pytestmark = pytest.mark.anyio


async def test_a_takeover_while_a_worker_records_leaves_one_holder(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, job_id = await upload(client, world, session)
    real_record = worker.record_compile
    taken: list[int] = []

    def take_over() -> None:
        # Another worker claims the job as the sweeper would hand it over: only while started.
        with session_scope() as other:
            result = other.execute(
                update(GradingJob)
                .where(GradingJob.id == job_id, GradingJob.state == JobState.started.value)
                .values(worker_id="other-host:2", heartbeat_at=utcnow(), attempt=2)
            )
            taken.append(result.rowcount)  # type: ignore[attr-defined]

    def record_during_a_takeover(*args: Any, **kwargs: Any) -> None:
        # The takeover comes while this worker is recording: it must either land before this
        # worker's hold (which then sees it) or wait until the record is committed.
        thread = threading.Thread(target=take_over)
        thread.start()
        thread.join(timeout=1.0)
        threads.append(thread)
        real_record(*args, **kwargs)

    threads: list[threading.Thread] = []
    monkeypatch.setattr(worker, "record_compile", record_during_a_takeover)
    outcome = grade_job(sid, job_id, me="slow-host:1")
    for thread in threads:
        thread.join()
    session.expire_all()
    job = session.get_one(GradingJob, job_id)
    if taken == [1]:
        # The other worker holds it: this one recorded nothing over it.
        assert outcome is Outcome.lost
        assert job.worker_id == "other-host:2" and job.state == JobState.started.value
    else:
        assert taken == [0] and outcome is Outcome.compiled
        assert job.worker_id == "slow-host:1" and job.state == JobState.waiting_gpu.value


def test_a_stale_job_out_of_attempts_is_not_claimed_again(session: Session) -> None:
    world = make_world(session)
    long_ago = utcnow() - timedelta(hours=1)
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compiling,
        job_state=JobState.started,
        created_at=long_ago,
    )
    job.attempt = get_settings().max_attempts
    job.worker_id = "crashed-host:1"
    job.started_at = job.heartbeat_at = job.sent_at = long_ago
    session.commit()
    # The broker delivers the message again after the worker died: the attempts are spent, so
    # this worker leaves it to the sweeper, which tells the student it was not their fault.
    assert grade_job(submission.id, job.id, me="next-host:1") is Outcome.duplicate
    session.expire_all()
    assert session.get_one(GradingJob, job.id).attempt == get_settings().max_attempts


async def test_a_regrade_replaces_a_job_still_waiting_for_a_gpu(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    sid, first = await upload(client, world, session)
    assert grade_job(sid, first, me="cpu-host:1") is Outcome.compiled
    r = await client.post(f"/api/v1/submissions/{sid}/regrade", headers=world.ta.auth)
    assert r.status_code == 202, r.text
    second = session.scalars(
        select(GradingJob.id).where(GradingJob.submission_id == sid, GradingJob.id != first)
    ).one()
    assert grade_job(sid, second, me="cpu-host:1") is Outcome.compiled
    # A GPU worker now sweeps: only the regrade runs; the job it replaced is not run as well.
    sent = sweep(has_gpu=True).to_gpu
    assert second in sent and first not in sent
    session.expire_all()
    assert session.get_one(GradingJob, first).state == JobState.failed.value
    # The program kept for the replaced job is gone; the regrade's waits for its GPU worker.
    assert session.get(KeptProgram, first) is None
    assert session.get(KeptProgram, second) is not None


async def test_a_grader_failure_while_compiling_is_not_the_students_compile_error(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.grading.worker import NOT_YOUR_FAULT

    sid, first = await upload(client, world, session)
    assert grade_job(sid, first, me="cpu-host:1") is Outcome.compiled
    # A graded verdict the regrade must not take away.
    submission = session.get_one(Submission, sid)
    submission.score, submission.graded_at = 7.0, utcnow()
    session.commit()
    r = await client.post(f"/api/v1/submissions/{sid}/regrade", headers=world.ta.auth)
    second = session.scalars(
        select(GradingJob.id).where(GradingJob.submission_id == sid, GradingJob.id != first)
    ).one()
    assert r.status_code == 202
    # An operator set an architecture NVRTC does not know: the grader fails, not the student.
    monkeypatch.setattr(get_settings(), "default_arch", "sm_bogus")
    assert grade_job(sid, second, me="cpu-host:1") is Outcome.error
    session.expire_all()
    submission = session.get_one(Submission, sid)
    assert submission.status == Status.error.value
    assert submission.status_message == NOT_YOUR_FAULT
    assert submission.score == 7.0  # the earlier verdict still counts
    assert session.get_one(GradingJob, second).state == JobState.failed.value


async def test_two_regrades_at_once_queue_one_job(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.submissions import service
    from app.users.models import User

    sid, first = await upload(client, world, session)
    assert grade_job(sid, first, me="cpu-host:1") is Outcome.compiled
    real_latest = service.latest_job
    outcomes: list[str] = []

    def second_click() -> None:
        # The Regrade button pressed twice: the second request runs while the first is inside.
        try:
            with session_scope() as other:
                ta = other.get_one(User, world.ta.user.id)
                sub = other.get_one(Submission, sid)
                service.regrade(other, user=ta, submission=sub, now=utcnow())
            outcomes.append("queued")
        except service.Conflict:
            outcomes.append("conflict")

    def latest_during_a_second_click(s: Session, *, submission: Submission) -> Any:
        if not threads:
            thread = threading.Thread(target=second_click)
            threads.append(thread)
            thread.start()
            thread.join(timeout=1.0)
        return real_latest(s, submission=submission)

    threads: list[threading.Thread] = []
    monkeypatch.setattr(service, "latest_job", latest_during_a_second_click)
    r = await client.post(f"/api/v1/submissions/{sid}/regrade", headers=world.ta.auth)
    for thread in threads:
        thread.join()
    session.expire_all()
    waiting = session.scalars(
        select(GradingJob).where(
            GradingJob.submission_id == sid, GradingJob.state == JobState.queued.value
        )
    ).all()
    assert len(waiting) == 1, (r.status_code, outcomes)
    assert sorted([r.status_code, 202 if outcomes == ["queued"] else 409]) == [202, 409]
