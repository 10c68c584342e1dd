"""/metrics (Prometheus text, behind its own token) and /admin/system (course staff)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session

from app.core.database import session_scope
from app.jobs import workers
from app.submissions.models import JobState, Status
from tests.app.conftest import GOOD_KERNEL, World, make_world, unique
from tests.app.factories import make_submission
from tests.app.scaled import settings_from
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio

TOKEN = "metrics-token-for-the-tests-0123456789"


@pytest.fixture
def metrics_on() -> Iterator[str]:
    with settings_from(metrics_token=TOKEN):
        yield TOKEN


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def register(name: str, *, gpu: str, model: str) -> None:
    workers.register_worker(
        name=name,
        host="gpu-host-7",
        pid=7,
        gpu=gpu,
        gpu_model=model,
        arch="sm_90",
        can_compile=True,
        can_run=True,
        note="",
        queues=["grading", "grading.gpu"],
        version="test",
    )


async def test_metrics_are_off_without_a_token_and_need_it_when_on(
    client: httpx.AsyncClient,
) -> None:
    off = await client.get("/metrics")
    assert off.status_code == 404 and "KERNELGRADER_METRICS_TOKEN" in off.text
    with settings_from(metrics_token=TOKEN):
        assert (await client.get("/metrics")).status_code == 401
        wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        ok = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")


async def test_metrics_count_uploads_outcomes_stages_queue_and_workers(
    client: httpx.AsyncClient, world: World, session: Session, metrics_on: str
) -> None:
    auth = {"Authorization": f"Bearer {metrics_on}"}
    before = samples((await client.get("/metrics", headers=auth)).text)
    course = (("course", world.course.slug),)
    assert ("kernelgrader_uploads_total", course) not in before

    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202
    _, graded = make_submission(session, user=world.student.user, lab=world.lab)
    graded.wait_seconds, graded.compile_seconds, graded.run_seconds = 0.2, 0.7, 45.0
    _, failed = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.error,
        job_state=JobState.failed,
    )
    failed.error = "run: the GPU is not healthy"
    session.commit()
    name = unique("gpu-host-7:")
    register(name, gpu="3", model="NVIDIA H200")
    with session_scope() as s:
        workers.note_timing(s, name=name, temperature_c=47, sm_clock_mhz=1980)
    try:
        after = samples((await client.get("/metrics", headers=auth)).text)
    finally:
        workers.mark_stopped(name)

    def grew(metric: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
        return after[(metric, labels)] - before.get((metric, labels), 0)

    assert after[("kernelgrader_uploads_total", course)] == 3
    assert grew("kernelgrader_gradings_total", (("outcome", "graded"),)) == 1
    assert grew("kernelgrader_gradings_total", (("outcome", "error"),)) == 1
    assert grew("kernelgrader_gradings_total", (("outcome", "compile_error"),)) == 0
    run = (("stage", "run"),)
    assert grew("kernelgrader_stage_seconds_count", run) == 1
    assert grew("kernelgrader_stage_seconds_sum", run) == pytest.approx(45.0)
    assert grew("kernelgrader_stage_seconds_bucket", (("le", "30.0"), *run)) == 0
    assert grew("kernelgrader_stage_seconds_bucket", (("le", "60.0"), *run)) == 1
    assert grew("kernelgrader_stage_seconds_bucket", (("le", "1.0"), ("stage", "compile"))) == 1
    assert grew("kernelgrader_queue_depth", (("gpu_model", ""), ("state", "queued"))) == 1
    assert after[("kernelgrader_queue_oldest_age_seconds", ())] >= 0
    alive = (("can_run", "true"), ("gpu_model", "NVIDIA H200"))
    assert after[("kernelgrader_workers_alive", alive)] >= 1
    gpu = (("gpu", "3"), ("gpu_model", "NVIDIA H200"), ("host", "gpu-host-7"))
    assert after[("kernelgrader_gpu_temperature_celsius", gpu)] == 47
    assert after[("kernelgrader_gpu_sm_clock_mhz", gpu)] == 1980


async def test_the_system_page_is_for_staff_and_shows_only_their_courses_jobs(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    other = make_world(session)
    mine, held = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    theirs, _ = make_submission(
        session,
        user=other.student.user,
        lab=other.lab,
        status=Status.queued,
        job_state=JobState.queued,
    )
    name = unique("gpu-host-7:")
    held.worker_id = name
    session.commit()
    register(name, gpu="0", model="NVIDIA H200")
    try:
        await login(client, world.student)
        refused = await client.get("/admin/system")
        assert refused.status_code == 403 and "course staff" in refused.text
        client.cookies.clear()
        await login(client, world.ta)
        page = await client.get("/admin/system")
    finally:
        workers.mark_stopped(name)
        held.state = JobState.done.value
        session.commit()
    assert page.status_code == 200, page.text
    table = page.text.split('id="workers"')[1].split("</table>")[0]
    assert "gpu-host-7" in table and "NVIDIA H200" in table and "alive" in table
    assert f'href="/submissions/{mine.id}"' in table
    jobs = page.text.split('id="jobs"')[1].split("</table>")[0]
    assert f'href="/submissions/{mine.id}"' in jobs
    assert f'href="/submissions/{theirs.id}"' not in page.text
