"""Students read sentences for students; the staff read the technical side beside them (issue 19,
item 3): a compiled submission on a worker that cannot run kernels, through the real worker."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.orm import Session

from app.grading.worker import Outcome
from tests.app.conftest import GOOD_KERNEL, World
from tests.app.grading.test_worker import submit_and_grade
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio

# What only staff may read: the worker's settings, its commands, the staff page, driver errors.
STAFF_WORDS = ("KERNELGRADER_", "kernelgrader worker", "/admin/system", "`", "cudaError")


async def test_a_compiled_submission_tells_its_student_no_staff_detail(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, outcome = await submit_and_grade(client, world, session, GOOD_KERNEL)
    assert outcome is Outcome.compiled
    # The tests' worker runs nothing on a GPU (KERNELGRADER_RUN_ON_GPU=false): staff learn why.
    assert "KERNELGRADER_RUN_ON_GPU=false" in submission.status_staff_note
    url = f"/api/v1/submissions/{submission.id}"
    mine = (await client.get(url, headers=world.student.auth)).json()
    assert mine["staff_note"] is None
    assert "waits for a GPU worker" in mine["status_message"]
    student_text = " ".join(
        [mine["status_message"], *[change["message"] for change in mine["history"]]]
    )
    for words in STAFF_WORDS:
        assert words not in student_text, words
    assert all(change["staff_note"] is None for change in mine["history"])

    staff = (await client.get(url, headers=world.ta.auth)).json()
    assert staff["status_message"] == mine["status_message"]
    assert "KERNELGRADER_RUN_ON_GPU=false" in staff["staff_note"]
    compiled = [c for c in staff["history"] if c["status"] == "compiled"]
    assert "KERNELGRADER_RUN_ON_GPU=false" in compiled[0]["staff_note"]

    # The page: the banner and the history, for each audience.
    await login(client, world.student)
    page = (await client.get(f"/submissions/{submission.id}")).text
    main = page.split('<main id="main"', 1)[1]
    assert "For staff" not in main and "KERNELGRADER_RUN_ON_GPU" not in main
    assert "/admin/system" not in page  # nor the header's link to it
    client.cookies.clear()
    await login(client, world.ta)
    page = (await client.get(f"/submissions/{submission.id}")).text
    assert 'id="staff-note"' in page and "KERNELGRADER_RUN_ON_GPU=false" in page
    assert '<a href="/admin/system">System</a>' in page  # staff reach it from every page


async def test_staff_notes_show_commands_as_code_never_raw_backticks(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    from app.jobs.workers import NO_RUNNER
    from app.submissions.models import Status
    from app.submissions.service import set_status

    submission, _ = await submit_and_grade(client, world, session, GOOD_KERNEL)
    note = NO_RUNNER.format(model="", seconds=30)
    set_status(session, submission, Status.compiled, "Compiled.", staff_note=note + " <b>x</b>")
    session.commit()
    await login(client, world.ta)
    page = (await client.get(f"/submissions/{submission.id}")).text
    banner = page.split('id="staff-note"', 1)[1].split("</p>", 1)[0]
    assert "<code>kernelgrader worker --gpus all</code>" in banner
    assert "`" not in banner
    assert '<a href="/admin/system">/admin/system</a>' in banner
    assert "&lt;b&gt;x&lt;/b&gt;" in banner  # the rest is escaped
