"""The API for running a course: lab settings, extensions, the staff's view of a lab, its zip,
regrading a whole lab, the leaderboard, sources and the Canvas export."""

from __future__ import annotations

import csv
import io
import zipfile
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import LatePolicy
from app.submissions.models import GradingJob, JobState, Priority, Status, Submission
from tests.app.conftest import GOOD_KERNEL, Member, World, make_member, make_world
from tests.app.factories import make_submission, make_timed_submission, minutes

pytestmark = pytest.mark.anyio


def lab_url(world: World) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}"


async def submit(client: httpx.AsyncClient, world: World, member: Member) -> httpx.Response:
    return await client.post(
        lab_url(world) + "/submissions",
        headers=member.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )


async def test_instructors_update_a_lab_and_late_flags_follow(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    late_one, _ = make_submission(
        session, user=world.student.user, lab=world.lab, score=5, created_at=utcnow()
    )
    session.commit()
    assert not late_one.late
    due = (utcnow() - timedelta(hours=1)).replace(microsecond=0)
    # TAs may not change settings; instructors may.
    body = {"due_at": due.isoformat(), "late_policy": "refuse", "score_policy": "last"}
    r = await client.patch(lab_url(world), headers=world.ta.auth, json=body)
    assert r.status_code == 403 and "Only the instructors" in r.json()["detail"]
    r = await client.patch(lab_url(world), headers=world.instructor.auth, json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["late_policy"] == "refuse" and out["score_policy"] == "last"
    assert len(out["changes"]) == 3  # the lab's folder is unchanged: only the settings
    assert out["digest"] == world.lab.digest and len(out["digest"]) == 64
    session.expire_all()
    assert session.get_one(Submission, late_one.id).late  # submitted after the new due date
    # Now closed for the student, who is told when it closed.
    r = await submit(client, world, world.student)
    assert r.status_code == 403 and "does not accept late submissions" in r.json()["detail"]
    # A field left out stays; a date sent as null is cleared (and lateness with it).
    r = await client.patch(lab_url(world), headers=world.instructor.auth, json={"due_at": None})
    assert r.json()["due_at"] is None and r.json()["late_policy"] == "refuse"
    session.expire_all()
    assert not session.get_one(Submission, late_one.id).late
    r = await client.patch(
        lab_url(world),
        headers=world.instructor.auth,
        json={"release_at": (utcnow() + timedelta(days=3)).isoformat(), "due_at": due.isoformat()},
    )
    assert r.status_code == 422 and "before the release date" in r.json()["detail"]


async def test_a_removed_lab_keeps_its_submissions_and_refuses_new_ones(
    client: httpx.AsyncClient, world: World
) -> None:
    sid = (await submit(client, world, world.student)).json()["id"]
    r = await client.delete(lab_url(world), headers=world.instructor.auth)
    assert r.status_code == 200 and r.json()["archived_at"]
    labs = await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
    assert labs.json() == []
    r = await submit(client, world, world.student)
    assert r.status_code == 403 and "removed" in r.json()["detail"]
    own = await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)
    assert own.status_code == 200
    listed = await client.get(
        f"/api/v1/courses/{world.course.slug}/submissions", headers=world.ta.auth
    )
    assert sid in [row["id"] for row in listed.json()]
    r = await client.patch(lab_url(world), headers=world.instructor.auth, json={"archived": False})
    assert r.json()["archived_at"] is None and "restored" in r.json()["changes"]
    assert (await submit(client, world, world.student)).status_code == 202


async def test_an_extension_lets_one_student_submit_after_the_due_date(
    client: httpx.AsyncClient, session: Session
) -> None:
    due = utcnow() - timedelta(hours=2)
    world = make_world(session, due_at=due, late_policy=LatePolicy.refuse)
    url = f"{lab_url(world)}/extensions/{world.student.email}"
    until = (utcnow() + timedelta(days=2)).replace(microsecond=0)
    # Students cannot grant themselves one; an extension must end after the due date.
    r = await client.put(url, headers=world.student.auth, json={"until": until.isoformat()})
    assert r.status_code == 403
    r = await client.put(url, headers=world.ta.auth, json={"until": (due - minutes(5)).isoformat()})
    assert r.status_code == 422 and "not after the lab's own due date" in r.json()["detail"]
    r = await client.put(
        url, headers=world.ta.auth, json={"until": until.isoformat(), "note": "illness"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["granted_by"] == world.ta.email and r.json()["note"] == "illness"
    # The student sees their own due date and may submit, on time; the other student may not.
    labs = (
        await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
    ).json()
    assert labs[0]["extended"] and labs[0]["open"]
    assert labs[0]["due_at"].startswith(until.strftime("%Y-%m-%dT%H:%M"))
    r = await submit(client, world, world.student)
    assert r.status_code == 202
    assert not session.get_one(Submission, r.json()["id"]).late
    assert (await submit(client, world, world.other_student)).status_code == 403
    listed = await client.get(
        f"/api/v1/courses/{world.course.slug}/extensions", headers=world.ta.auth
    )
    assert [(e["student"], e["lab"]) for e in listed.json()] == [
        (world.student.email, world.lab.slug)
    ]
    assert (await client.delete(url, headers=world.ta.auth)).status_code == 204
    assert (await client.delete(url, headers=world.ta.auth)).status_code == 404
    assert (await submit(client, world, world.student)).status_code == 403


async def test_revoking_an_extension_marks_work_after_the_due_date_late(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    url = f"{lab_url(world)}/extensions/{world.student.email}"
    until = (utcnow() + timedelta(days=1)).isoformat()
    await client.put(url, headers=world.instructor.auth, json={"until": until})
    sid = (await submit(client, world, world.student)).json()["id"]
    session.expire_all()
    assert not session.get_one(Submission, sid).late
    await client.delete(url, headers=world.instructor.auth)
    session.expire_all()
    assert session.get_one(Submission, sid).late


async def test_the_staff_view_has_a_row_per_student_with_filters(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=1))
    t0 = utcnow() - timedelta(days=1)
    s = world.student.user
    make_submission(session, user=s, lab=world.lab, score=4, created_at=t0)
    make_timed_submission(session, user=s, lab=world.lab, median_ms=0.5, created_at=t0 + minutes(1))
    make_submission(
        session, user=s, lab=world.lab, status=Status.compiled, created_at=t0 + minutes(2)
    )
    session.commit()
    url = f"{lab_url(world)}/students"
    assert (await client.get(url, headers=world.student.auth)).status_code == 403
    rows = {r["email"]: r for r in (await client.get(url, headers=world.ta.auth)).json()}
    assert set(rows) == {world.student.email, world.other_student.email}  # students only
    mine = rows[world.student.email]
    assert mine["score"] == 10 and mine["attempts"] == 3 and mine["pending"] == 1
    assert mine["last_status"] == "compiled" and not mine["late"]
    assert mine["kernel_ms"] == 0.5 and mine["gpu"] == "H100 SXM5"
    other = rows[world.other_student.email]
    assert other["score"] is None and other["attempts"] == 0 and other["last_submission"] is None
    only = await client.get(url, headers=world.ta.auth, params={"status": "none"})
    assert [r["email"] for r in only.json()] == [world.other_student.email]
    pending = await client.get(url, headers=world.ta.auth, params={"status": "pending"})
    assert [r["email"] for r in pending.json()] == [world.student.email]
    found = await client.get(url, headers=world.ta.auth, params={"q": world.other_student.email})
    assert [r["email"] for r in found.json()] == [world.other_student.email]
    bad = await client.get(url, headers=world.ta.auth, params={"status": "nonsense"})
    assert bad.status_code == 422 and "not a status filter" in bad.json()["detail"]


async def test_the_zip_holds_each_students_counted_submission(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    t0 = utcnow() - timedelta(days=1)
    low, _ = make_submission(
        session, user=world.student.user, lab=world.lab, score=2, created_at=t0
    )
    best, _ = make_submission(
        session, user=world.student.user, lab=world.lab, score=9, created_at=t0 + minutes(1)
    )
    best.source_text = "// the best one\n" + GOOD_KERNEL
    session.commit()
    url = f"{lab_url(world)}/submissions.zip"
    assert (await client.get(url, headers=world.student.auth)).status_code == 403
    r = await client.get(url, headers=world.ta.auth)
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    names = archive.namelist()
    mine = [n for n in names if world.student.email in n]
    assert mine == [f"scale-test/{world.student.email}/scale.cu"]
    assert archive.read(mine[0]).decode().startswith("// the best one")
    manifest = list(csv.DictReader(io.StringIO(archive.read("scale-test/manifest.csv").decode())))
    assert [(m["email"], m["submission_id"], m["which"]) for m in manifest] == [
        (world.student.email, str(best.id), "counted")
    ]
    assert low.id != best.id


async def test_the_zip_holds_a_compiled_kernel_over_a_counted_compile_error(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    t0 = utcnow() - timedelta(hours=1)
    broken, _ = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compile_error,
        score=0,
        created_at=t0,
        job_state=JobState.failed,
    )
    broken.compile_ok = False
    broken.source_text = "// does not compile\n"
    # Compiled since, and waiting for a GPU: its verdict (and score) is still to come.
    waiting, _ = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compiled,
        created_at=t0 + minutes(5),
        job_state=JobState.waiting_gpu,
    )
    waiting.compile_ok = True
    waiting.source_text = "// compiled\n" + GOOD_KERNEL
    session.commit()
    r = await client.get(f"{lab_url(world)}/submissions.zip", headers=world.ta.auth)
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    mine = [n for n in archive.namelist() if world.student.email in n]
    assert len(mine) == 1 and archive.read(mine[0]).decode().startswith("// compiled")
    manifest = list(csv.DictReader(io.StringIO(archive.read("scale-test/manifest.csv").decode())))
    row = next(m for m in manifest if m["email"] == world.student.email)
    assert (row["submission_id"], row["which"], row["score"]) == (
        str(waiting.id),
        "latest that compiled (not graded yet)",
        "",
    )


async def test_regrade_all_queues_behind_new_uploads(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    made = [
        make_submission(session, user=m.user, lab=world.lab, score=5)
        for m in (world.student, world.other_student)
    ]
    graded = [submission for submission, _ in made]
    made[0][1].lab_digest = "0" * 64  # graded against another version; the other unrecorded
    session.commit()
    url = f"{lab_url(world)}/regrade"
    assert (await client.post(url, headers=world.student.auth)).status_code == 403
    r = await client.post(url, headers=world.ta.auth)
    assert r.status_code == 202 and r.json() == {
        "queued": 2,
        "skipped": 0,
        "older_version": 1,
        "unrecorded_version": 1,
        "lab_digest": world.lab.digest,
    }
    # Again at once: both are already waiting.
    again = (await client.post(url, headers=world.ta.auth)).json()
    assert (again["queued"], again["skipped"], again["older_version"]) == (0, 2, 0)
    jobs = session.scalars(
        select(GradingJob).where(
            GradingJob.submission_id.in_([s.id for s in graded]),
            GradingJob.state == JobState.queued.value,
        )
    ).all()
    assert len(jobs) == 2
    assert all(j.priority == Priority.background.value and j.sent_at is None for j in jobs)
    # The earlier verdict still counts, marked pending; the page explains the wait.
    detail = await client.get(f"/api/v1/submissions/{graded[0].id}", headers=world.student.auth)
    assert detail.json()["score"] == 5 and detail.json()["queue_position"] is None
    assert "when no new submission is waiting" in detail.json()["status_message"]


async def test_the_leaderboard_is_opt_in_per_gpu_under_a_pseudonym(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    third = make_member(session, world.course, world.student.role)
    make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.9)
    make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.4)
    make_timed_submission(session, user=world.other_student.user, lab=world.lab, median_ms=0.2)
    # Fastest of all, but wrong: not ranked. On another GPU: its own board.
    make_timed_submission(session, user=third.user, lab=world.lab, median_ms=0.1, passed=False)
    make_timed_submission(
        session, user=third.user, lab=world.lab, median_ms=0.3, gpu="NVIDIA A100-SXM4-80GB"
    )
    session.commit()
    url = f"{lab_url(world)}/leaderboard"
    assert (await client.get(url, headers=world.student.auth)).json() == []  # nobody opted in
    me = url + "/me"
    r = await client.put(me, headers=world.student.auth, json={"pseudonym": "Warp Nine"})
    assert r.status_code == 200 and r.json() == {"pseudonym": "Warp Nine"}
    r = await client.put(me, headers=world.other_student.auth, json={"pseudonym": "warp nine"})
    assert r.status_code == 409 and "already called" in r.json()["detail"]
    r = await client.put(me, headers=world.other_student.auth, json={"pseudonym": "a@b.edu"})
    assert r.status_code == 422
    assert (
        await client.put(me, headers=world.ta.auth, json={"pseudonym": "Staffer"})
    ).status_code == 403
    await client.put(me, headers=world.other_student.auth, json={"pseudonym": "Bank Conflict"})
    await client.put(me, headers=third.auth, json={"pseudonym": "Third"})
    boards = (await client.get(url, headers=world.student.auth)).json()
    assert [b["gpu"] for b in boards] == ["H100 SXM5", "A100 SXM4 80GB"]
    h100 = boards[0]["places"]
    assert [(p["rank"], p["pseudonym"], p["median_ms"], p["you"]) for p in h100] == [
        (1, "Bank Conflict", 0.2, False),
        (2, "Warp Nine", 0.4, True),
    ]
    assert [p["pseudonym"] for p in boards[1]["places"]] == ["Third"]
    text = str(boards)
    assert world.student.email not in text and world.other_student.email not in text
    assert (await client.delete(me, headers=world.other_student.auth)).status_code == 204
    boards = {b["gpu"]: b for b in (await client.get(url, headers=world.ta.auth)).json()}
    assert [p["pseudonym"] for p in boards["H100 SXM5"]["places"]] == ["Warp Nine"]


async def test_a_student_downloads_their_own_source_only(
    client: httpx.AsyncClient, world: World
) -> None:
    sid = (await submit(client, world, world.student)).json()["id"]
    url = f"/api/v1/submissions/{sid}/source"
    r = await client.get(url, headers=world.student.auth)
    assert r.status_code == 200 and r.text == GOOD_KERNEL
    assert 'filename="scale.cu"' in r.headers["content-disposition"]
    assert (await client.get(url, headers=world.ta.auth)).status_code == 200
    assert (await client.get(url, headers=world.other_student.auth)).status_code == 404


async def test_the_gradebook_in_canvas_import_format(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_submission(session, user=world.student.user, lab=world.lab, score=7)
    make_submission(session, user=world.other_student.user, lab=world.lab, status=Status.queued)
    session.commit()
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/gradebook.csv",
        headers=world.ta.auth,
        params={"format": "canvas"},
    )
    assert r.status_code == 200 and "canvas" in r.headers["content-disposition"]
    table = list(csv.reader(io.StringIO(r.text)))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", world.lab.title]
    assert table[1] == ["Points Possible", "", "", "", "", "10"]
    rows = {row[3]: row for row in table[2:]}
    assert rows[world.student.email][5] == "7"
    assert rows[world.other_student.email][5] == ""  # pending: left for Canvas to keep as is
    bad = await client.get(
        f"/api/v1/courses/{world.course.slug}/gradebook.csv",
        headers=world.ta.auth,
        params={"format": "excel"},
    )
    assert bad.status_code == 422
