"""Profiling jobs in the database: queued after a fully correct grading or by staff,
recorded with their report file and the references' profiles, old report files pruned."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Conflict, Forbidden
from app.core.settings import get_settings
from app.courses.models import Role
from app.courses.service import add_lab, create_course
from app.courses.specs import spec_for
from app.profiling.models import KernelProfile, ProfileReport, ProfileState, ReferenceProfile
from app.profiling.service import (
    kept_reference_profiles,
    latest_profile,
    prune_reports,
    record_profile,
    request_profile,
)
from graders.profile import tool
from graders.profile.stage import ProfileResult, ProfileRun
from tests.app.conftest import World, make_member, unique
from tests.app.factories import make_submission, make_timed_submission
from tests.app.profiling.helpers import SUMMARIES, graded_transpose


@pytest.fixture
def transpose(session: Session) -> Iterator[tuple]:  # type: ignore[type-arg]
    course = create_course(session, slug=unique("prof"), title="Profiles")
    lab = add_lab(session, course=course, ref="matrix-transpose")
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    session.commit()
    yield lab, student, ta


def test_a_fully_correct_grading_queues_a_profile_held_back(session: Session, world: World) -> None:
    sub = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None and profile.state == ProfileState.queued.value
    assert profile.sent_at is None  # the sweep sends it, when no grading waits
    assert profile.lab_digest == spec_for(world.lab).digest
    assert profile.case_name == "n-1000"  # the scale lab has no timed case: its largest visible
    assert profile.grading_job_id is not None and profile.requested_by_id is None


def test_no_profile_after_a_failed_case_and_none_twice_for_one_lab_version(
    session: Session, world: World
) -> None:
    failed = make_timed_submission(
        session, user=world.student.user, lab=world.lab, median_ms=1.0, passed=False
    )
    assert latest_profile(session, submission_id=failed.id) is None
    sub = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
    first = latest_profile(session, submission_id=sub.id)
    # A regrade of the same submission against the same lab version queues none again.
    from app.grading.record import record_report
    from app.submissions.models import GradingJob, JobState
    from graders.results import GpuInfo, GradeReport

    job = GradingJob(submission_id=sub.id, state=JobState.started.value, queued_at=utcnow())
    session.add(job)
    session.flush()
    report = GradeReport(lab="x", cases=[], score=0, max_score=10, gpu=GpuInfo(name="G"))
    record_report(session, submission=sub, job=job, report=report)
    assert latest_profile(session, submission_id=sub.id) is first


def test_profiling_after_grading_can_be_switched_off(
    session: Session, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELGRADER_PROFILE_AFTER_GRADING", "false")
    get_settings.cache_clear()
    try:
        sub = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=1.0)
        assert latest_profile(session, submission_id=sub.id) is None
    finally:
        monkeypatch.delenv("KERNELGRADER_PROFILE_AFTER_GRADING")
        get_settings.cache_clear()


def test_staff_may_ask_for_a_profile_of_any_submission_students_may_not(
    session: Session, world: World
) -> None:
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab)
    with pytest.raises(Forbidden, match="Only the course's staff"):
        request_profile(session, user=world.student.user, submission=sub, now=utcnow())
    profile = request_profile(session, user=world.ta.user, submission=sub, now=utcnow())
    assert profile.requested_by_id == world.ta.user.id
    with pytest.raises(Conflict, match="already waiting to be profiled"):
        request_profile(session, user=world.ta.user, submission=sub, now=utcnow())
    broken, _ = make_submission(session, user=world.student.user, lab=world.lab)
    broken.compile_ok = False
    with pytest.raises(Conflict, match="did not compile"):
        request_profile(session, user=world.ta.user, submission=broken, now=utcnow())


def _result(**runs: ProfileRun) -> ProfileResult:
    mine = runs.pop("submission")
    return ProfileResult(
        "ok",
        case="rect-5000x3000",
        submission=mine,
        references=runs,
        ncu_version="2025.3.1.0",
        gpu="NVIDIA H200",
        seconds=7.5,
    )


def test_a_finished_profile_keeps_its_report_and_the_references_profiles(
    session: Session, transpose: tuple
) -> None:  # type: ignore[type-arg]
    lab, student, _ = transpose
    sub = graded_transpose(session, user=student.user, lab=lab, median_ms=0.4)
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None
    gpu = unique("NVIDIA H200 ")
    result = _result(
        submission=ProfileRun("submission", "ok", summary=SUMMARIES["naive"], report=b"NVR1",
                              report_bytes=4),
        naive=ProfileRun("naive", "ok", summary=SUMMARIES["naive"]),
        tiled=ProfileRun("tiled", "ok", summary=SUMMARIES["padded"]),
    )  # fmt: skip
    result.gpu = gpu
    record_profile(session, profile=profile, result=result, gpu=gpu, now=utcnow())
    session.flush()
    assert profile.state == ProfileState.done.value and profile.report_kept
    assert profile.summary == SUMMARIES["naive"] and profile.seconds == 7.5
    data = session.scalar(select(ProfileReport.data).where(ProfileReport.profile_id == profile.id))
    assert data == b"NVR1"
    kept = kept_reference_profiles(
        session, gpu=gpu, digest=profile.lab_digest, case="rect-5000x3000"
    )
    assert set(kept) == {"naive", "tiled"}
    assert kept["tiled"].summary == SUMMARIES["padded"]
    # Kept again by a later profiling: replaced, not duplicated.
    record_profile(session, profile=profile, result=result, gpu=gpu, now=utcnow())
    rows = session.scalars(select(ReferenceProfile).where(ReferenceProfile.gpu_name == gpu))
    assert len(list(rows)) == 2


def test_where_profiling_cannot_run_the_row_says_so_in_one_sentence(
    session: Session, transpose: tuple
) -> None:  # type: ignore[type-arg]
    lab, student, _ = transpose
    sub = graded_transpose(session, user=student.user, lab=lab, median_ms=0.4)
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None
    result = ProfileResult("unavailable", tool.COUNTERS_NOT_PERMITTED, case="rect-5000x3000")
    record_profile(session, profile=profile, result=result, gpu="NVIDIA H200", now=utcnow())
    assert profile.state == ProfileState.unavailable.value
    assert profile.message == tool.COUNTERS_NOT_PERMITTED
    assert not profile.report_kept and profile.summary == {}


def test_only_the_newest_report_files_of_a_student_in_a_lab_are_kept(
    session: Session, transpose: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[type-arg]
    lab, student, _ = transpose
    monkeypatch.setenv("KERNELGRADER_PROFILE_REPORTS_KEPT", "2")
    get_settings.cache_clear()
    try:
        profiles = []
        for _ in range(3):
            sub = graded_transpose(session, user=student.user, lab=lab, median_ms=0.4)
            profile = latest_profile(session, submission_id=sub.id)
            assert profile is not None
            run = ProfileRun("submission", "ok", summary=SUMMARIES["naive"], report=b"NVR")
            record_profile(
                session, profile=profile, result=_result(submission=run), gpu="G", now=utcnow()
            )
            profiles.append(profile)
        session.flush()
        for p in profiles:
            session.refresh(p)
        assert [p.report_kept for p in profiles] == [False, True, True]
        assert profiles[0].summary == SUMMARIES["naive"]  # its findings stay
        assert prune_reports(session, user_id=student.user.id, lab_id=lab.id) == 0
    finally:
        monkeypatch.delenv("KERNELGRADER_PROFILE_REPORTS_KEPT")
        get_settings.cache_clear()
    assert session.scalar(select(KernelProfile.id).where(KernelProfile.id == profiles[0].id))
