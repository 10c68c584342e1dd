"""A course's late-day policy change recounts every student in short transactions (issue 31,
class 17): on main the change settled every student of every lab in its own transaction, which
held SQLite's write lock for 9 s with 300 students and 16 labs (7 of 24 uploads meanwhile got
503). Now the change commits alone and the students are settled a batch at a time, each batch
its own transaction: an upload made between two batches goes through while the recount is still
under way, the API and the late-days page say how far it got, and a recount left half-way (its
request died) is finished by the workers' sweep. How long the lock is held, before and after, is
measured by bench/latedays_recount.py, not asserted here."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

import app.policy.recount as recount
from app.core.database import utcnow
from app.courses.models import Role
from app.courses.service import add_lab
from app.policy.recount import sweep_recounts
from tests.app.conftest import GOOD_KERNEL, Member, World, make_member, make_world
from tests.app.latedays.helpers import graded
from tests.app.races import live, race_database  # noqa: F401
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio


def _late_course(session: Session, students: int) -> tuple[World, list[Member]]:
    """Three labs due a day ago, every student with a submission 2 days late in each, counted."""
    world = make_world(session, due_at=utcnow() - timedelta(days=3))
    world.course.late_days = 6
    labs = [world.lab] + [
        add_lab(session, course=world.course, ref=ref, due_at=world.lab.due_at)
        for ref in ("vector-scale", "hadamard")
    ]
    members = [world.student, world.other_student]
    members += [make_member(session, world.course, Role.student) for _ in range(students - 2)]
    for member in members:
        for lab in labs:
            assert lab.due_at is not None
            graded(session, user=member.user, lab=lab, at=lab.due_at + timedelta(hours=30))
    session.commit()
    return world, members


async def _spent(client: httpx.AsyncClient, world: World, member: Member) -> tuple[int, int]:
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/late-days/{member.email}",
        headers=world.instructor.auth,
    )
    return r.json()["spent"], r.json()["left"]


async def test_an_upload_goes_through_between_two_batches_of_a_recount(
    live: str,  # noqa: F811
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, members = _late_course(session, students=6)
    # Each student spent 2 days on each of the three labs; a cap of 1 per lab changes that.
    monkeypatch.setattr(recount, "BATCH_SETTLES", 3)  # one student a batch
    monkeypatch.setattr(recount, "REQUEST_SECONDS", 600.0)  # all of it in the request
    first_done, uploaded = threading.Event(), threading.Event()
    real = recount.recount_batch

    def batch_then_let_an_upload_in(**kwargs: object) -> bool:
        more = real(**kwargs)  # type: ignore[arg-type]
        if not first_done.is_set():
            first_done.set()
            uploaded.wait(60)
        return more

    monkeypatch.setattr(recount, "recount_batch", batch_then_let_an_upload_in)
    base = f"/api/v1/courses/{world.course.slug}"
    async with httpx.AsyncClient(base_url=live, timeout=120) as client:
        assert await _spent(client, world, members[-1]) == (6, 0)
        change = asyncio.create_task(
            client.patch(
                f"{base}/policies", headers=world.instructor.auth, json={"late_day_cap": 1}
            )
        )
        assert await asyncio.to_thread(first_done.wait, 60)
        # Between two batches: the upload is taken at once, and the recount is under way.
        upload = await client.post(
            f"{base}/labs/{world.lab.slug}/submissions",
            headers=members[-1].auth,
            files={"file": ("k.cu", GOOD_KERNEL.encode())},
        )
        under_way = (await client.get(f"{base}/policies", headers=world.student.auth)).json()
        uploaded.set()
        assert upload.status_code == 202, upload.text
        assert not change.done()
        assert under_way["recount"] is not None
        assert (under_way["recount"]["students_done"], under_way["recount"]["students"]) == (1, 6)
        answer = await change
        assert answer.status_code == 200, answer.text
        assert answer.json()["late_day_cap"] == 1 and answer.json()["recount"] is None
        # Every student was recounted: one day on each lab now.
        for member in members[:-1]:
            assert await _spent(client, world, member) == (3, 3)
        # The last one uploaded again meanwhile: that upload holds a day of its own lab's.
        assert await _spent(client, world, members[-1]) == (3, 3)


async def test_the_sweep_finishes_a_recount_its_request_left(
    client: httpx.AsyncClient, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, members = _late_course(session, students=4)
    monkeypatch.setattr(recount, "BATCH_SETTLES", 3)
    import app.policy.api as api

    # The request's process stops after the first batch, before a thread took the rest over.
    monkeypatch.setattr(api, "recount_after_change", lambda course_id: recount.recount_batch(
        course_id=course_id, now=utcnow()
    ))  # fmt: skip
    r = await client.patch(
        f"/api/v1/courses/{world.course.slug}/policies",
        headers=world.instructor.auth,
        json={"late_day_cap": 1},
    )
    assert r.status_code == 200, r.text
    assert (r.json()["recount"]["students_done"], r.json()["recount"]["students"]) == (1, 4)
    await login(client, world.instructor)
    page = (await client.get(f"/courses/{world.course.slug}/late-days")).text
    assert 'id="recount"' in page and "(1 of 4 students done)" in page
    assert world.course.id not in sweep_recounts(now=utcnow())  # its request may still run
    assert world.course.id in sweep_recounts(now=utcnow() + timedelta(minutes=1))
    page = (await client.get(f"/courses/{world.course.slug}/late-days")).text
    assert 'id="recount"' not in page
    # One day on each of the three labs, for every student.
    for member in members:
        assert await _spent(client, world, member) == (3, 3)


async def test_a_large_courses_answer_comes_first_and_the_recount_goes_on(
    client: httpx.AsyncClient, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, members = _late_course(session, students=5)
    monkeypatch.setattr(recount, "BATCH_SETTLES", 3)
    monkeypatch.setattr(recount, "REQUEST_SECONDS", 0.0)  # one batch, then a thread
    base = f"/api/v1/courses/{world.course.slug}/policies"
    r = await client.patch(base, headers=world.instructor.auth, json={"late_day_cap": 1})
    assert r.status_code == 200, r.text
    assert r.json()["recount"]["students_done"] == 1
    for _ in range(600):  # the thread's batches; 60 s at most
        state = (await client.get(base, headers=world.student.auth)).json()["recount"]
        if state is None:
            break
        await asyncio.sleep(0.1)
    assert state is None
    for member in members:
        assert await _spent(client, world, member) == (3, 3)
