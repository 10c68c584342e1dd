"""Profiled submissions for the service's and pages' tests: real summaries, no GPU.

The summaries are what graders.profile.extract made of a real Nsight Compute report (H200,
ncu 2025.3.1; tests/graders/profile/data), so the findings and figures are the real ones.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab
from app.grading.record import record_report
from app.profiling.models import KernelProfile, ProfileReport, ProfileState, ReferenceProfile
from app.submissions.models import JobState, Status, Submission
from app.users.models import User
from graders.results import CaseResult, GpuInfo, GradeReport, TimingStats
from tests.app.factories import make_submission

DATA = Path(__file__).resolve().parents[2] / "graders" / "profile" / "data"
SUMMARIES: dict[str, dict[str, Any]] = json.loads(
    (DATA / "probe-summaries.json").read_text(encoding="utf-8")
)
PROBE_SOURCE = (DATA / "probe-transpose.cu").read_text(encoding="utf-8")
GPU = "NVIDIA H200"
TIMED_CASE = "rect-5000x3000"  # matrix-transpose's timed (and profiled) case
REPORT = b"NVR\0a stand-in for a report file"


def stats(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, min_ms=ms, mean_ms=ms, stdev_ms=0.0, reps=20, rse=0.0)


def graded_transpose(
    session: Session,
    *,
    user: User,
    lab: Lab,
    median_ms: float,
    passed: bool = True,
    source: str = PROBE_SOURCE,
    created_at: datetime | None = None,
    gpu: str = GPU,
) -> Submission:
    """A matrix-transpose submission graded on an H200, its timed case beside the references."""
    submission, job = make_submission(
        session,
        user=user,
        lab=lab,
        status=Status.running,
        job_state=JobState.started,
        created_at=created_at,
    )
    submission.source_text = source
    submission.filename = "transpose.cu"
    case = CaseResult(
        name=TIMED_CASE,
        sizes={"rows": 5000, "cols": 3000},
        hidden=False,
        passed=passed,
        verdict="pass" if passed else "wrong_answer",
        message="",
        points=8 if passed else 0,
        max_points=8,
        timing=stats(median_ms),
        reference_timings={"naive": stats(0.5), "tiled": stats(0.12)},
    )
    report = GradeReport(
        lab=lab.slug,
        cases=[case],
        score=8 if passed else 0,
        max_score=lab.max_score or 8,
        summary="ok",
        gpu=GpuInfo(name=gpu, arch="sm_90"),
    )
    record_report(session, submission=submission, job=job, report=report)
    session.flush()
    return submission


def profiled(
    session: Session,
    submission: Submission,
    summary: dict[str, Any],
    *,
    digest: str,
    report: bytes | None = REPORT,
    gpu: str = GPU,
) -> KernelProfile:
    """The submission's profile, done, as a GPU worker records it."""
    profile = KernelProfile(
        submission_id=submission.id,
        state=ProfileState.done.value,
        queued_at=utcnow(),
        finished_at=utcnow(),
        gpu_name=gpu,
        lab_digest=digest,
        case_name=TIMED_CASE,
        ncu_version="2025.3.1.0",
        seconds=6.5,
        summary=summary,
        report_bytes=len(report or b""),
        report_kept=report is not None,
    )
    session.add(profile)
    session.flush()
    if report is not None:
        session.add(ProfileReport(profile_id=profile.id, data=report))
    return profile


def keep_references(session: Session, *, digest: str, gpu: str = GPU) -> None:
    """The transpose lab's references as profiled on the H200: naive, and tiled (padded)."""
    for name, probe in (("naive", "naive"), ("tiled", "padded")):
        session.add(
            ReferenceProfile(
                gpu_name=gpu,
                lab_digest=digest,
                case_name=TIMED_CASE,
                reference=name,
                summary=SUMMARIES[probe],
                ncu_version="2025.3.1.0",
            )
        )
    session.flush()
