"""Rows for the browser tests' server: people with known passwords, and matmul-tiled graded on
a GPU (timings and all), written straight into that server's own database."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.security import hash_password
from app.courses.models import Course, Lab, LatePolicy, Role
from app.courses.service import enroll, get_course, get_lab
from app.courses.specs import spec_for
from app.grading.record import record_report
from app.performance.leaderboard import join_leaderboard
from app.policy.rules import update_lab
from app.profiling.models import KernelProfile, ProfileReport, ProfileState, ReferenceProfile
from app.submissions.models import GradingJob, JobState, Status, Submission
from app.submissions.service import set_status
from app.users.models import User
from app.users.service import ensure_user
from graders.results import CaseResult, GpuInfo, GradeReport, TimingStats

PASSWORD = "browser tests pw"
GPU = "NVIDIA H100 80GB HBM3"
SOURCE = """\
#define TILE_WIDTH 32
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float a[TILE_WIDTH][TILE_WIDTH];
    __shared__ float b[TILE_WIDTH][TILE_WIDTH];
    // ...
}
"""


@dataclass(frozen=True)
class People:
    instructor: str
    ta: str
    student: str  # has a name; uploads, opts in, gets an extension
    unnamed: str  # no display name: shown by email once


@functools.cache
def password_hash() -> str:
    # argon2 is slow on purpose: hashed once, so the seed's transaction (which holds SQLite's
    # write lock) stays short, and the server's worker is not kept waiting past its timeout.
    return hash_password(PASSWORD)


def _person(session: Session, course: Course, email: str, name: str, role: Role) -> User:
    user = ensure_user(session, email=email, name=name)
    user.password_hash = password_hash()
    enroll(session, user=user, course=course, role=role)
    return user


def _stats(ms: float) -> TimingStats:
    return TimingStats(
        median_ms=ms, min_ms=ms * 0.98, mean_ms=ms * 1.01, stdev_ms=ms * 0.02, reps=40, rse=0.004
    )


def matmul_report(lab: Lab, *, median_ms: float, wrong: set[str] = frozenset()) -> GradeReport:
    spec = spec_for(lab)
    assert spec.timing is not None
    cases = []
    for case in spec.cases:
        passed = case.name not in wrong
        timed = case.name == spec.timing.case
        cases.append(
            CaseResult(
                name=case.name,
                sizes=dict(case.sizes),
                hidden=case.hidden,
                passed=passed,
                verdict="pass" if passed else "wrong_answer",
                message="" if passed else "C(1022, 0): expected 3.25, got 0 (1023 wrong).",
                points=case.points if passed else 0.0,
                max_points=case.points,
                timing=_stats(median_ms) if timed else None,
                reference_timings=(
                    {"naive": _stats(9.6), "tiled": _stats(2.45), "cublas": _stats(0.33)}
                    if timed
                    else {}
                ),
            )
        )
    correctness = sum(c.points for c in cases)
    performance = 20.0 * max(0.0, min(1.0, (9.6 - median_ms) / (9.6 - 2.45))) if not wrong else 0
    return GradeReport(
        lab=lab.slug,
        cases=cases,
        score=correctness + performance,
        max_score=spec.max_score,
        correctness_points=correctness,
        performance_points=performance,
        max_performance_points=20,
        summary=f"{sum(c.passed for c in cases)} of {len(cases)} cases passed.",
        gpu=GpuInfo(name=GPU, arch="sm_90", sm_clock_mhz=1980, max_sm_clock_mhz=1980),
        stage_seconds={"compile": 0.4, "run": 5.2},
    )


def graded(session: Session, user: User, lab: Lab, report: GradeReport, minutes_ago: float) -> int:
    at = utcnow() - timedelta(minutes=minutes_ago)
    submission = Submission(
        user_id=user.id,
        lab_id=lab.id,
        source_text=SOURCE,
        sha256="0" * 64,
        filename="tiled.cu",
        created_at=at,
        max_score=lab.max_score,
        late=bool(lab.due_at and at > lab.due_at),
    )
    session.add(submission)
    session.flush()
    set_status(session, submission, Status.running)
    job = GradingJob(submission_id=submission.id, state=JobState.started.value, queued_at=at)
    session.add(job)
    session.flush()
    record_report(session, submission=submission, job=job, report=report)
    return submission.id


def seed(session: Session) -> tuple[People, dict[str, int]]:
    """The demo course made by `serve`, with staff and students, matmul-tiled graded for the
    class, hadamard closed (refusing late work) and a leaderboard with a few names on it."""
    course = get_course(session, slug="demo")
    instructor = session.scalars(select(User).where(User.email == "instructor@example.com")).one()
    instructor.password_hash = password_hash()
    people = People(
        instructor=instructor.email,
        ta=_person(session, course, "ta@uni.edu", "Tom Assistant", Role.ta).email,
        student=_person(session, course, "ada@uni.edu", "Ada Lovelace", Role.student).email,
        unnamed=_person(session, course, "grace@uni.edu", "", Role.student).email,
    )
    matmul = get_lab(session, course=course, slug="matmul-tiled")
    update_lab(session, lab=matmul, due_at=utcnow() - timedelta(minutes=30))
    hadamard = get_lab(session, course=course, slug="hadamard")
    update_lab(
        session, lab=hadamard, due_at=utcnow() - timedelta(hours=2), late_policy=LatePolicy.refuse
    )
    names = [
        "Alan Turing",
        "Barbara Liskov",
        "Claude Shannon",
        "Donald Knuth",
        "Edsger Dijkstra",
        "Frances Allen",
        "John Backus",
        "Ken Thompson",
        "Leslie Lamport",
        "Margaret Hamilton",
    ]
    times = [1.9, 2.3, 2.6, 3.1, 3.4, 4.8, 6.2, 8.9, 2.2, 12.5]
    ids: dict[str, int] = {}
    for i, (name, ms) in enumerate(zip(names, times, strict=True)):
        user = _person(session, course, f"{name.split()[0].lower()}@uni.edu", name, Role.student)
        wrong = {"square-1023", "rect-1000x777x1025"} if i in (3, 7) else set()
        graded(session, user, matmul, matmul_report(matmul, median_ms=ms, wrong=wrong), 90 + i)
        if i < 5:
            join_leaderboard(
                session, course=course, lab=matmul, user=user, pseudonym=f"Team {name.split()[1]}"
            )
    ada = session.scalars(select(User).where(User.email == people.student)).one()
    ids["ada_matmul"] = graded(session, ada, matmul, matmul_report(matmul, median_ms=2.75), 60)
    grace = session.scalars(select(User).where(User.email == people.unnamed)).one()
    ids["grace_matmul"] = graded(
        session, grace, matmul, matmul_report(matmul, median_ms=5.5, wrong={"square-1023"}), 70
    )
    # One of Grace's still waits for a GPU: pending, not zero.
    waiting = Submission(
        user_id=grace.id,
        lab_id=matmul.id,
        source_text=SOURCE,
        sha256="1" * 64,
        filename="tiled-v2.cu",
        created_at=utcnow() - timedelta(minutes=5),
        max_score=matmul.max_score,
        late=True,
    )
    session.add(waiting)
    session.flush()
    set_status(session, waiting, Status.compiled, "Compiled for sm_90. Running it waits for a GPU.")
    session.add(GradingJob(submission_id=waiting.id, state=JobState.waiting_gpu.value))
    session.flush()
    ids.update(seed_profiles(session, course, ada))
    return people, ids


PROFILE_DATA = Path(__file__).resolve().parents[2] / "graders" / "profile" / "data"
PROFILE_GPU = "NVIDIA H200"  # the GPU the saved reports were taken on


def transpose_report(lab: Lab, *, median_ms: float) -> GradeReport:
    spec = spec_for(lab)
    assert spec.timing is not None
    cases = [
        CaseResult(
            name=case.name,
            sizes=dict(case.sizes),
            hidden=case.hidden,
            passed=True,
            verdict="pass",
            message="",
            points=case.points,
            max_points=case.points,
            timing=_stats(median_ms) if case.name == spec.timing.case else None,
            reference_timings=(
                {"naive": _stats(0.52), "tiled": _stats(0.121)}
                if case.name == spec.timing.case
                else {}
            ),
        )
        for case in spec.cases
    ]
    return GradeReport(
        lab=lab.slug,
        cases=cases,
        score=spec.max_score,
        max_score=spec.max_score,
        summary=f"All {len(cases)} cases passed.",
        gpu=GpuInfo(name=PROFILE_GPU, arch="sm_90", sm_clock_mhz=1980, max_sm_clock_mhz=1980),
    )


def seed_profiles(session: Session, course: Course, ada: User) -> dict[str, int]:
    """matrix-transpose graded on an H200 and profiled: Ada's three tries (naive, a tile
    without padding, a padded tile), the references' kept profiles, and a few classmates'."""
    summaries = json.loads((PROFILE_DATA / "probe-summaries.json").read_text(encoding="utf-8"))
    source = (PROFILE_DATA / "probe-transpose.cu").read_text(encoding="utf-8")
    lab = get_lab(session, course=course, slug="matrix-transpose")
    spec = spec_for(lab)
    assert spec.timing is not None
    case = spec.timing.case
    for reference, probe in (("naive", "naive"), ("tiled", "padded")):
        session.add(
            ReferenceProfile(
                gpu_name=PROFILE_GPU,
                lab_digest=spec.digest,
                case_name=case,
                reference=reference,
                summary=summaries[probe],
                ncu_version="2025.3.1.0",
            )
        )

    def profiled(user: User, probe: str, median_ms: float, minutes_ago: float) -> int:
        sid = graded(session, user, lab, transpose_report(lab, median_ms=median_ms), minutes_ago)
        submission = session.get_one(Submission, sid)
        # Each try's first line differs, so that two of them compare (lines stay where they are).
        submission.source_text = source.replace(
            "#define TILE 32", f"#define TILE 32  // {probe}, {median_ms} ms", 1
        )
        submission.filename = "transpose.cu"
        for queued in session.scalars(
            select(KernelProfile).where(KernelProfile.submission_id == sid)
        ):
            queued.state = ProfileState.failed.value  # the one queued after grading, replaced
        profile = KernelProfile(
            submission_id=sid,
            state=ProfileState.done.value,
            finished_at=utcnow() - timedelta(minutes=minutes_ago - 1),
            gpu_name=PROFILE_GPU,
            lab_digest=spec.digest,
            case_name=case,
            ncu_version="2025.3.1.0",
            seconds=6.6,
            summary=summaries[probe],
            report_bytes=7_319_377,
            report_kept=True,
        )
        session.add(profile)
        session.flush()
        session.add(ProfileReport(profile_id=profile.id, data=b"NVR\0 stand-in report"))
        return sid

    ids = {
        "ada_transpose_naive": profiled(ada, "naive", 0.52, 50),
        "ada_transpose_unpadded": profiled(ada, "tiled", 0.2, 40),
        "ada_transpose_padded": profiled(ada, "padded", 0.125, 30),
    }
    for i, probe in enumerate(("naive", "naive", "tiled", "padded", "naive")):
        name = ("alan", "barbara", "claude", "donald", "edsger")[i]
        user = session.scalars(select(User).where(User.email == f"{name}@uni.edu")).one()
        profiled(user, probe, {"naive": 0.51, "tiled": 0.21, "padded": 0.13}[probe], 80 + i)
    session.flush()
    return ids
