"""On a GPU worker the job runs after compiling; these run only where a GPU is."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.courses.models import Role
from app.courses.service import add_lab, create_course
from app.grading.models import KeptProgram
from app.grading.worker import Outcome, grade_job
from app.jobs.gpu_probe import run_unavailable_reason
from app.submissions.models import CaseResult, GradingJob, JobState, Status, Submission
from graders.gpu import detect_arch
from tests.app.conftest import GOOD_KERNEL, World, make_member, unique
from tests.app.grading.test_worker import history, submit_and_grade

pytestmark = [pytest.mark.anyio, pytest.mark.gpu]

NO_BOUNDS_CHECK = GOOD_KERNEL.replace("if (i < n) ", "")


@pytest.fixture
def gpu_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KERNELGRADER_RUN_ON_GPU", "true")
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()


async def test_a_good_kernel_is_graded_with_one_row_per_case(
    gpu_worker: None, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    assert run_unavailable_reason() is None
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.graded
    assert submission.status == Status.graded.value
    assert submission.score == 10 and submission.graded_at is not None
    assert history(session, submission) == ["queued", "compiling", "running", "graded"]
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    rows = session.scalars(select(CaseResult).where(CaseResult.job_id == job.id)).all()
    assert sorted(r.name for r in rows) == ["n-1000", "n-1048579"]
    assert all(r.passed for r in rows)


async def test_a_kernel_without_a_bounds_check_loses_the_odd_size(
    gpu_worker: None, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, outcome = await submit_and_grade(client, world, session, NO_BOUNDS_CHECK)
    assert outcome is Outcome.graded
    assert submission.score is not None and submission.score < 10
    detail = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.student.auth)
    cases = {c["name"]: c for c in detail.json()["cases"]}
    assert cases["n-1000"]["passed"] is False
    assert cases["n-1000"]["verdict"] != "pass"


TIMED_LAB = Path(__file__).resolve().parents[1] / "labs" / "scale-timed"


async def test_the_verdicts_show_before_timing_and_the_sanitizer_end(
    gpu_worker: None, client: httpx.AsyncClient, session: Session
) -> None:
    course = create_course(session, slug=unique("timed"), title="Timed")
    lab = add_lab(session, course=course, ref=str(TIMED_LAB))
    student = make_member(session, course, Role.student)
    session.commit()
    r = await client.post(
        f"/api/v1/courses/{course.slug}/labs/{lab.slug}/submissions",
        headers=student.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
    worker = threading.Thread(target=grade_job, args=(sid, job_id), kwargs={"me": "test:1"})
    worker.start()
    seen: list[tuple[str, int]] = []
    while worker.is_alive():
        body = (await client.get(f"/api/v1/submissions/{sid}", headers=student.auth)).json()
        seen.append((body["status"], sum(1 for c in body["cases"] if c["verdict"])))
        await asyncio.sleep(0.05)
    worker.join()
    session.expire_all()
    submission = session.get_one(Submission, sid)
    statuses = history(session, submission)
    print("statuses polled:", sorted(set(seen)))
    assert statuses == ["queued", "compiling", "running", "timing", "sanitizer", "graded"]
    # While the timed repetitions ran, the page already had both verdicts.
    assert ("timing", 2) in seen
    assert submission.score == 10


async def test_a_gpu_worker_runs_the_program_a_compile_only_worker_kept(
    monkeypatch: pytest.MonkeyPatch, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    # A compile-only worker (the default here) compiles it and leaves it waiting for a GPU.
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.compiled
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    kept = session.get_one(KeptProgram, job.id)
    kept.result = {**kept.result, "message": "Compiled for sm_90 (kept)."}
    job.state = JobState.queued.value  # as the sweeper hands it to a GPU worker
    session.commit()
    monkeypatch.setenv("KERNELGRADER_RUN_ON_GPU", "true")
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()
    try:
        if not kept.recipe.startswith(f"{detect_arch()} "):
            pytest.skip(f"this GPU is not {kept.recipe.split()[0]}: its worker compiles anew")
        assert grade_job(submission.id, job.id, me="test-gpu-worker:1") is Outcome.graded
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        run_unavailable_reason.cache_clear()
    session.expire_all()
    graded = session.get_one(Submission, submission.id)
    assert graded.status == Status.graded.value and graded.score == 10
    assert graded.compile_message == "Compiled for sm_90 (kept)."  # ran the kept program
    assert session.get(KeptProgram, job.id) is None  # forgotten once its report is recorded
