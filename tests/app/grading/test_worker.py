"""The worker's compile stage with the real NVRTC compiler (no GPU needed)."""

from __future__ import annotations

import re
from dataclasses import replace

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.specs import spec_for
from app.grading import programs
from app.grading.models import KeptProgram
from app.grading.worker import Outcome, grade_job
from app.submissions.models import (
    CaseResult,
    GradingJob,
    JobState,
    Status,
    Submission,
    SubmissionEvent,
)
from app.submissions.service import compile_name
from graders.compile.compiler import compile_submission
from graders.results import CompileResult
from tests.app.conftest import GOOD_KERNEL, World
from tests.app.factories import upload

pytestmark = pytest.mark.anyio

SYNTAX_ERROR = GOOD_KERNEL.replace("factor * src[i]", "factr * src[i]")
NO_EXTERN_C = GOOD_KERNEL.replace('extern "C" ', "")
WRONG_NAME = GOOD_KERNEL.replace("void scale(", "void scale_kernel(")


async def submit_and_grade(
    client: httpx.AsyncClient, world: World, session: Session, source: str
) -> tuple[Submission, Outcome]:
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", source.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
    outcome = grade_job(sid, job_id, me="test-worker:1")
    session.expire_all()
    return session.get_one(Submission, sid), outcome


def history(session: Session, submission: Submission) -> list[str]:
    return list(
        session.scalars(
            select(SubmissionEvent.status)
            .where(SubmissionEvent.submission_id == submission.id)
            .order_by(SubmissionEvent.id)
        )
    )


async def test_a_good_kernel_compiles_and_waits_for_a_gpu_worker(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.compiled
    assert submission.status == Status.compiled.value
    assert submission.compile_ok is True
    assert submission.compile_arch == "sm_90"
    assert "waits for a GPU worker" in submission.status_message
    assert history(session, submission) == ["queued", "compiling", "compiled"]
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    assert job.state == JobState.waiting_gpu.value and job.attempt == 1
    assert job.started_at and job.compiled_at and job.heartbeat_at
    assert job.lab_digest == world.lab.digest and len(job.lab_digest) == 64  # graded against
    page = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.student.auth)
    assert page.json()["status"] == "compiled"


async def test_a_compile_error_is_a_result_with_line_numbers(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, outcome = await submit_and_grade(client, world, session, SYNTAX_ERROR)
    assert outcome is Outcome.compile_error
    assert submission.status == Status.compile_error.value
    assert submission.compile_ok is False and submission.score == 0
    # The log points into the student's file by its own name and line (line 4 here).
    assert "scale.cu(4)" in submission.compile_log
    assert history(session, submission) == ["queued", "compiling", "compile_error"]
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    assert job.state == JobState.failed.value and job.finished_at is not None
    # The page links the log line to the source line and marks it.
    from tests.app.web.test_routes import login

    await login(client, world.student)
    page = await client.get(f"/submissions/{submission.id}")
    assert 'href="#L4"' in page.text
    assert '<tr id="L4" class="flag">' in page.text


async def test_a_missing_kernel_names_what_the_lab_expects_and_what_was_found(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, _ = await submit_and_grade(client, world, session, WRONG_NAME)
    assert submission.status == Status.compile_error.value
    assert submission.compile_reason == "missing_kernel"
    assert "scale" in submission.compile_message
    assert "scale_kernel" in submission.compile_message


async def test_a_missing_extern_c_gets_a_hint(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, _ = await submit_and_grade(client, world, session, NO_EXTERN_C)
    assert submission.compile_reason == "missing_kernel"
    assert 'extern "C"' in submission.compile_message


async def test_grading_the_same_job_twice_gives_one_result(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, first = await submit_and_grade(client, world, session, GOOD_KERNEL)
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    # The broker delivers the same message again: the worker sees the job is taken and stops.
    assert grade_job(submission.id, job.id, me="another-worker:2") is Outcome.duplicate
    session.expire_all()
    assert history(session, submission) == ["queued", "compiling", "compiled"]
    assert session.get_one(GradingJob, job.id).attempt == 1
    rows = session.scalars(select(CaseResult).where(CaseResult.job_id == job.id)).all()
    assert rows == []  # no run stage here, so no case rows; and none duplicated
    assert grade_job(submission.id, 10**9, me="x:1") is Outcome.missing


async def test_staff_regrade_makes_a_new_job_and_students_cannot(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, _ = await submit_and_grade(client, world, session, GOOD_KERNEL)
    url = f"/api/v1/submissions/{submission.id}/regrade"
    student = await client.post(url, headers=world.student.auth)
    assert student.status_code == 403
    r = await client.post(url, headers=world.ta.auth)
    assert r.status_code == 202 and r.json()["status"] == "queued"
    # A second regrade while the first waits is refused with a reason.
    again = await client.post(url, headers=world.instructor.auth)
    assert again.status_code == 409 and "already waiting" in again.json()["detail"]
    jobs = session.scalars(
        select(GradingJob).where(GradingJob.submission_id == submission.id).order_by(GradingJob.id)
    ).all()
    assert len(jobs) == 2 and jobs[1].state == JobState.queued.value
    assert grade_job(submission.id, jobs[1].id, me="test-worker:1") is Outcome.compiled
    detail = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.ta.auth)
    statuses = [change["status"] for change in detail.json()["history"]]
    assert statuses == ["queued", "compiling", "compiled", "queued", "compiling", "compiled"]
    assert detail.json()["attempts"] == 2


async def test_a_lab_that_names_a_gpu_model_waits_for_a_worker_of_that_model(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    world.lab.gpu_model = "H100 PCIe"
    session.commit()
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.compiled
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    # Parked under the model's routing key, for a GPU worker of that model to sweep up.
    assert (job.state, job.gpu_model) == (JobState.waiting_gpu.value, "h100-pcie")
    assert job.wait_seconds is not None and job.compile_seconds is not None
    assert "waits for a GPU worker" in submission.status_message
    # No H100 worker runs in the tests: the staff's note says so, for them to act on; the
    # student's message says nothing of workers to start.
    assert "No worker that can run it on H100 PCIe GPUs" in submission.status_staff_note
    assert "No worker that can run it" not in submission.status_message


async def test_a_database_away_while_recording_is_no_error_and_the_worker_takes_its_job_back(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from app.grading import worker

    sid, job_id = await upload(client, world, session)
    real_record = worker.record_compile

    def database_away(*args: object, **kwargs: object) -> None:
        raise OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))

    monkeypatch.setattr(worker, "record_compile", database_away)
    with pytest.raises(OperationalError):  # for the task's retry, not a verdict
        grade_job(sid, job_id, me="test-worker:7")
    session.expire_all()
    assert session.get_one(Submission, sid).status == Status.compiling.value  # not "error"
    # The task's retry, on the same worker, once the database answers again.
    monkeypatch.setattr(worker, "record_compile", real_record)
    assert grade_job(sid, job_id, me="test-worker:7") is Outcome.compiled
    # A later delivery of the same job finds it done.
    session.expire_all()
    assert session.get_one(Submission, sid).status == Status.compiled.value
    assert grade_job(sid, job_id, me="test-worker:8") is Outcome.duplicate


async def test_a_second_delivery_while_this_process_runs_the_job_is_a_duplicate(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    from app.grading import worker

    sid, job_id = await upload(client, world, session)
    assert worker._claim(sid, job_id, "test-worker:9")  # the first delivery, still running
    try:
        # A second copy reaches the same worker process: not "its own job to take back".
        assert grade_job(sid, job_id, me="test-worker:9") is Outcome.duplicate
    finally:
        worker._release(job_id)
    # Once the first run has ended (here: it stopped without recording), the retry may.
    assert grade_job(sid, job_id, me="test-worker:9") is Outcome.compiled


async def test_a_grader_fault_queues_the_job_again_until_its_attempts_are_spent(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen on a two-GPU host: a sandboxed child that could not start its threads crashed while
    # compiling a reference. Not the student's code, and gone on the next try.
    from app.core.settings import get_settings
    from app.grading import worker

    sid, job_id = await upload(client, world, session)
    real_record = worker.record_compile

    def grader_fault(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the compiler stopped unexpectedly (SIGINT)")

    monkeypatch.setattr(worker, "record_compile", grader_fault)
    attempts = get_settings().max_attempts
    for attempt in range(1, attempts):
        assert grade_job(sid, job_id, me="test-worker:8") is Outcome.error
        session.expire_all()
        job, submission = session.get_one(GradingJob, job_id), session.get_one(Submission, sid)
        assert (job.state, job.attempt, job.worker_id) == (JobState.queued.value, attempt, None)
        assert "the compiler stopped unexpectedly" in job.error  # for staff
        assert job.sent_at is not None  # sent again at once, not left to the sweeper
        assert submission.status == Status.queued.value
        assert f"attempt {attempt + 1} of {attempts}" in submission.status_message
        assert "not your code" in submission.status_message
        assert "the compiler stopped unexpectedly" in submission.status_staff_note
        assert "the compiler stopped unexpectedly" not in submission.status_message
    # The next try goes through: the fault cost the student nothing.
    monkeypatch.setattr(worker, "record_compile", real_record)
    assert grade_job(sid, job_id, me="test-worker:8") is Outcome.compiled
    session.expire_all()
    assert session.get_one(Submission, sid).status == Status.compiled.value
    # A fault on every attempt ends in `error` with the sentence, and nothing is sent again.
    r = await client.post(f"/api/v1/submissions/{sid}/regrade", headers=world.ta.auth)
    assert r.status_code == 202, r.text
    session.expire_all()
    again = session.scalars(
        select(GradingJob.id).where(GradingJob.submission_id == sid, GradingJob.id != job_id)
    ).one()
    monkeypatch.setattr(worker, "record_compile", grader_fault)
    for _ in range(attempts):
        assert grade_job(sid, again, me="test-worker:8") is Outcome.error
    session.expire_all()
    assert session.get_one(GradingJob, again).state == JobState.failed.value
    assert session.get_one(Submission, sid).status == Status.error.value
    assert grade_job(sid, again, me="test-worker:8") is not Outcome.compiled


# A compiled job's program is kept for the GPU worker that runs it (app.grading.programs).
SANDBOX_DIR = re.compile(rb"/tmp/kg-sandbox-[0-9]+-[a-z0-9_]+")


def _same_program(a: CompileResult, b: CompileResult) -> bool:
    # Line info names the compile's own sandbox folder; nothing else differs between compiles.
    assert a.cubin and b.cubin
    return replace(a, seconds=0, cubin=None) == replace(
        b, seconds=0, cubin=None
    ) and SANDBOX_DIR.sub(b"", a.cubin) == SANDBOX_DIR.sub(b"", b.cubin)


async def test_a_job_left_for_a_gpu_worker_keeps_the_program_that_worker_would_compile(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.compiled
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    how = programs.recipe(arch="sm_90", digest=world.lab.digest, filename=compile_name("scale.cu"))
    kept = programs.kept(session, job_id=job.id, recipe=how)
    assert kept is not None
    spec = spec_for(world.lab)
    fresh = compile_submission(
        spec, GOOD_KERNEL, arch="sm_90", filename=compile_name("scale.cu"), line_info=True
    )
    assert _same_program(kept, fresh)
    assert kept.seconds == job.compile_seconds
    # Made otherwise than this worker would make it: not used.
    for other in (
        programs.recipe(arch="sm_80", digest=world.lab.digest, filename=compile_name("scale.cu")),
        programs.recipe(arch="sm_90", digest="0" * 64, filename=compile_name("scale.cu")),
    ):
        assert programs.kept(session, job_id=job.id, recipe=other) is None


async def test_the_next_worker_runs_the_kept_program_unless_it_was_made_otherwise(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, _ = await submit_and_grade(client, world, session, GOOD_KERNEL)
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id)).one()
    row = session.get_one(KeptProgram, job.id)
    made_as = row.recipe

    def taken_again(recipe: str) -> Submission:
        # As the sweeper hands a waiting job to a GPU worker: queued again, the same row.
        kept = session.get_one(KeptProgram, job.id)
        kept.result = {**kept.result, "message": "Kept program."}
        kept.recipe = recipe
        session.get_one(GradingJob, job.id).state = JobState.queued.value
        session.commit()
        assert grade_job(submission.id, job.id, me="test-worker:2") is Outcome.compiled
        session.expire_all()
        return session.get_one(Submission, submission.id)

    # Made as this worker would make it: its compile result is the kept one, not compiled anew.
    assert taken_again(made_as).compile_message == "Kept program."
    # Made for another GPU: compiled again here, and that program kept in its place.
    again = taken_again(made_as.replace("sm_90", "sm_80"))
    assert again.compile_message == "Compiled for sm_90."
    assert session.get_one(KeptProgram, job.id).recipe == made_as


def test_a_recorded_report_or_a_failed_attempt_forgets_the_kept_program(session: Session) -> None:
    from app.grading.record import record_report
    from app.grading.worker import _fail
    from tests.app.conftest import make_world
    from tests.app.factories import make_submission
    from tests.app.grading.test_record import _report

    world = make_world(session)
    program = CompileResult(ok=True, message="Compiled for sm_90.", arch="sm_90", cubin=b"\x7fELF")
    for ends in ("recorded", "failed"):
        submission, job = make_submission(
            session,
            user=world.student.user,
            lab=world.lab,
            status=Status.running,
            job_state=JobState.started,
        )
        job.worker_id, job.attempt = "test-worker:1", 1
        assert programs.keep(session, job_id=job.id, result=program, recipe="r")
        session.commit()
        assert programs.kept(session, job_id=job.id, recipe="r") == program
        if ends == "recorded":
            record_report(session, submission=submission, job=job, report=_report(True))
            session.commit()
        else:
            _fail(submission.id, job.id, "test-worker:1", "RuntimeError: boom")
            session.expire_all()
            assert session.get_one(GradingJob, job.id).state == JobState.queued.value
        assert session.get(KeptProgram, job.id) is None, ends
