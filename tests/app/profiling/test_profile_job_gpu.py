"""Items 1-3 through the service on a GPU host with Nsight Compute: a graded submission is
profiled by the worker's job, its findings on its lines, beside the lab's references, which
are profiled once per GPU model and lab version and then kept.

Run on the GPU host (the web stack beside CuPy): pytest -m gpu tests/app/profiling
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.courses.models import Role
from app.courses.service import add_lab, create_course
from app.grading.worker import Outcome, grade_job
from app.jobs.gpu_probe import run_unavailable_reason, worker_gpu
from app.profiling.jobs import profile_job
from app.profiling.models import ProfileState, ReferenceProfile
from app.profiling.service import latest_profile, request_profile
from app.submissions.models import GradingJob, Submission
from graders.profile import tool
from graders.spec import builtin_labs_dir
from tests.app.conftest import make_member, unique

pytestmark = [pytest.mark.anyio, pytest.mark.gpu]
UNPADDED = (builtin_labs_dir() / "matrix-transpose" / "slow" / "unpadded_tile.cu").read_text()


@pytest.fixture
def gpu_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    reason = tool.unavailable_reason()
    if reason:
        if os.environ.get("KERNELGRADER_REQUIRE_NCU") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setenv("KERNELGRADER_RUN_ON_GPU", "true")
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
    run_unavailable_reason.cache_clear()


async def test_a_graded_submission_is_profiled_beside_kept_references(
    gpu_worker: None, client: httpx.AsyncClient, session: Session
) -> None:
    course = create_course(session, slug=unique("ncu"), title="Profiles on a GPU")
    lab = add_lab(session, course=course, ref="matrix-transpose")
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    session.commit()
    r = await client.post(
        f"/api/v1/courses/{course.slug}/labs/{lab.slug}/submissions",
        headers=student.auth,
        files={"file": ("unpadded.cu", UNPADDED.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
    assert grade_job(sid, job_id, me="test-gpu:1") is Outcome.graded
    session.expire_all()
    profile = latest_profile(session, submission_id=sid)
    assert profile is not None and profile.state == ProfileState.queued.value

    assert profile_job(profile.id, me="test-gpu:1") == ProfileState.done.value
    session.expire_all()  # the job ran in its own session: this one still holds it queued
    body = (await client.get(f"/api/v1/submissions/{sid}/profile", headers=student.auth)).json()
    assert body["state"] == "done", body
    assert ("bank_conflicts", 26) in [(f["kind"], f["line"]) for f in body["findings"]]
    assert body["seconds"] < 120 and body["ncu_version"]
    assert body["ladder"]["order"] == ["naive", "tiled"]
    assert body["ladder"]["resembles"] == "tiled"
    report = await client.get(body["report_url"], headers=student.auth)
    assert report.status_code == 200 and report.content[:3] == b"NVR"

    gpu, _ = worker_gpu()
    kept = {
        row.reference: row.profiled_at
        for row in session.scalars(
            select(ReferenceProfile).where(
                ReferenceProfile.gpu_name == gpu, ReferenceProfile.lab_digest == profile.lab_digest
            )
        )
    }
    assert set(kept) == {"naive", "tiled"}
    # Profiled again: the references are kept, not profiled a second time.
    submission = session.get_one(Submission, sid)
    again = request_profile(session, user=ta.user, submission=submission, now=profile.queued_at)
    session.commit()
    assert profile_job(again.id, me="test-gpu:1") == ProfileState.done.value
    session.expire_all()
    later = {
        row.reference: row.profiled_at
        for row in session.scalars(
            select(ReferenceProfile).where(
                ReferenceProfile.gpu_name == gpu, ReferenceProfile.lab_digest == profile.lab_digest
            )
        )
    }
    assert later == kept
    second = session.get_one(type(again), again.id)
    assert second.seconds is not None and profile.seconds is not None
    print(f"profiles took {profile.seconds:.1f} s (with references) and {second.seconds:.1f} s")
