"""A real `kernelgrader worker` process on the SQLite broker grades a submission end to end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from sqlalchemy.orm import Session

from app.jobs.celery_app import celery_app
from app.submissions.models import Status, Submission
from tests.app.conftest import GOOD_KERNEL, World

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def worker_command() -> list[str]:
    exe = shutil.which("kernelgrader", path=os.path.dirname(sys.executable))
    return [exe, "worker"] if exe else [sys.executable, "-m", "app.cli", "worker"]


async def test_a_worker_process_takes_the_job_from_the_broker(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    # Messages other tests left on the broker would only slow this worker down.
    celery_app.control.purge()
    worker = subprocess.Popen(
        [*worker_command(), "--loglevel", "WARNING"],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        r = await client.post(
            f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
            headers=world.student.auth,
            files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        )
        assert r.status_code == 202
        sid = r.json()["id"]
        status = "queued"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and worker.poll() is None:
            session.expire_all()
            status = session.get_one(Submission, sid).status
            if Status(status).is_final or status == Status.compiled.value:
                break
            time.sleep(0.2)
        assert worker.poll() is None, "the worker exited early"
        assert status == Status.compiled.value
        detail = await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)
        assert detail.json()["compile_ok"] is True
    finally:
        worker.terminate()
        try:
            output, _ = worker.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
    assert "Traceback" not in output, output
