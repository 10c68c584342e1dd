"""Profiling jobs go out one at a time, only while no grading waits and a GPU worker of their
model is alive; a GPU worker runs them (here, on a machine without Nsight Compute: the
sentence that says so); a silent worker's job is taken back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.jobs.celery_app import GPU_QUEUE
from app.jobs.models import Worker
from app.profiling import jobs
from app.profiling.jobs import FAILED_ON_OUR_SIDE, profile_job
from app.profiling.models import KernelProfile, ProfileState
from app.profiling.service import latest_profile, request_profile
from app.profiling.sweep import profiles_to_send
from app.submissions.models import GradingJob, JobState
from graders.profile import tool
from tests.app.conftest import World, unique
from tests.app.factories import make_submission, make_timed_submission


@pytest.fixture
def quiet(session: Session) -> Iterator[None]:
    """Within this test's transaction (rolled back after): no grading waits, no other
    profile is out, and no worker is alive but the ones the test adds."""
    session.execute(
        update(GradingJob)
        .where(GradingJob.state == JobState.queued.value)
        .values(state=JobState.done.value)
    )
    session.execute(
        update(KernelProfile)
        .where(KernelProfile.state.in_([ProfileState.queued.value, ProfileState.started.value]))
        .values(state=ProfileState.failed.value)
    )
    session.execute(update(Worker).values(stopped_at=utcnow()))
    yield


def _gpu_worker(session: Session, model: str = "NVIDIA H200") -> None:
    session.add(
        Worker(
            name=unique("gpu-worker:"),
            host="h",
            pid=1,
            gpu_model=model,
            can_compile=True,
            can_run=True,
            queues=[GPU_QUEUE],
        )
    )
    session.flush()


def test_a_profile_goes_out_only_once_no_grading_waits(
    session: Session, world: World, quiet: None
) -> None:
    sub = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None
    _gpu_worker(session)
    waiting, _ = make_submission(
        session, user=world.other_student.user, lab=world.lab, job_state=JobState.queued
    )
    assert profiles_to_send(session, now=utcnow()) == []
    session.execute(
        update(GradingJob)
        .where(GradingJob.submission_id == waiting.id)
        .values(state=JobState.done.value)
    )
    sent = profiles_to_send(session, now=utcnow())
    assert [(s.job_id, s.queue) for s in sent] == [(profile.id, GPU_QUEUE)]
    session.refresh(profile)
    assert profile.sent_at is not None and profile.sent_queue == GPU_QUEUE


def test_without_a_live_gpu_worker_it_waits_unsent(
    session: Session, world: World, quiet: None
) -> None:
    sub = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
    assert profiles_to_send(session, now=utcnow()) == []
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None and profile.sent_at is None


def test_one_at_a_time_and_staffs_requests_first(
    session: Session, world: World, quiet: None
) -> None:
    _gpu_worker(session)
    first = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
    other, _ = make_submission(session, user=world.other_student.user, lab=world.lab)
    asked = request_profile(session, user=world.ta.user, submission=other, now=utcnow())
    sent = profiles_to_send(session, now=utcnow())
    assert [s.job_id for s in sent] == [asked.id]
    assert profiles_to_send(session, now=utcnow()) == []  # one is out already
    queued = latest_profile(session, submission_id=first.id)
    assert queued is not None and queued.sent_at is None


def test_a_silent_workers_profile_is_taken_back_and_failed_once_out_of_attempts(
    session: Session, world: World, quiet: None
) -> None:
    long_ago = utcnow() - timedelta(hours=1)
    subs = [
        make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
        for _ in range(2)
    ]
    profiles = [latest_profile(session, submission_id=s.id) for s in subs]
    for profile, attempt in zip(profiles, (1, 3), strict=True):
        assert profile is not None
        profile.state = ProfileState.started.value
        profile.worker_id = "gone:1"
        profile.attempt = attempt
        profile.heartbeat_at = profile.sent_at = long_ago
    session.flush()
    profiles_to_send(session, now=utcnow())
    for profile in profiles:
        session.refresh(profile)
    again, spent = profiles
    assert again is not None and again.state == ProfileState.queued.value
    assert again.worker_id is None and again.sent_at is None
    assert spent is not None and spent.state == ProfileState.failed.value
    assert spent.message == FAILED_ON_OUR_SIDE


def _committed_profile(world: World) -> tuple[int, int]:
    with session_scope() as session:
        sub, _ = make_submission(session, user=world.student.user, lab=world.lab)
        profile = request_profile(session, user=world.ta.user, submission=sub, now=utcnow())
        return sub.id, profile.id


def test_a_worker_without_nsight_compute_records_why_in_one_sentence(world: World) -> None:
    if tool.executable() is not None:
        pytest.skip("Nsight Compute is installed here; this is the host without it")
    _, profile_id = _committed_profile(world)
    assert profile_job(profile_id, me="cpu-host:1") == ProfileState.unavailable.value
    assert profile_job(profile_id, me="cpu-host:2") == "duplicate"
    with session_scope() as session:
        profile = session.get_one(KernelProfile, profile_id)
        assert profile.message == tool.NOT_INSTALLED
        assert profile.finished_at is not None and profile.attempt == 1


def test_our_failure_is_retried_then_told_as_not_the_students_fault(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the profiler's child could not start")

    monkeypatch.setattr(jobs, "_profile_held", broken)
    _, profile_id = _committed_profile(world)
    assert profile_job(profile_id, me="w:1") == "error"
    with session_scope() as session:
        profile = session.get_one(KernelProfile, profile_id)
        assert profile.state == ProfileState.queued.value and profile.sent_at is None
        assert "could not start" in profile.error
        profile.attempt = get_settings().max_attempts - 1  # the next claim is the last attempt
    assert profile_job(profile_id, me="w:1") == "error"
    with session_scope() as session:
        profile = session.get_one(KernelProfile, profile_id)
        assert profile.state == ProfileState.failed.value
        assert profile.message == FAILED_ON_OUR_SIDE


def test_a_profile_that_let_a_timed_section_go_first_waits_in_its_place_uncounted(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The GPU side (the profiled program ending once a timed section waits) runs on a GPU
    # host: tests/graders/gpu/test_profile_gpu.py. Here, what the job makes of its answer.
    from graders.profile import stage
    from graders.profile.tool import YIELDED, YIELDED_MESSAGE

    asked: list[dict[str, object]] = []

    def yields(*args: object, **kwargs: object) -> stage.ProfileResult:
        asked.append(kwargs)
        return stage.ProfileResult(YIELDED, YIELDED_MESSAGE)

    monkeypatch.setattr(stage, "profile_submission", yields)
    _, profile_id = _committed_profile(world)
    with session_scope() as session:
        queued_at = session.get_one(KernelProfile, profile_id).queued_at
    for attempt in range(get_settings().max_attempts + 1):
        assert profile_job(profile_id, me=f"w:{attempt}") == "yielded"
        with session_scope() as session:
            profile = session.get_one(KernelProfile, profile_id)
            assert profile.state == ProfileState.queued.value
            assert profile.sent_at is None and profile.worker_id is None
            assert profile.attempt == 0  # however often it yields, it never runs out
            assert profile.queued_at == queued_at and profile.error == ""
    assert asked and all(kw.get("yield_to_timing") is True for kw in asked)
