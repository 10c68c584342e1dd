"""The CLI for running a course: lab update/remove/restore, extensions, regrade, invites."""

from __future__ import annotations

import csv
import io
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.cli import cli
from app.core.database import session_scope
from app.courses.models import Course, Lab, Role
from app.courses.service import get_course, labs_of, role_in
from app.submissions.models import GradingJob, Priority
from app.users.service import authenticate, ensure_user, find_user
from tests.app.conftest import TEST_LAB, unique
from tests.app.factories import make_submission

runner = CliRunner()


def run(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def fails(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 1, result.output
    return result.output


def lab_row(course: str, slug: str = "scale-test") -> Lab:
    with session_scope() as session:
        return session.scalars(
            select(Lab)
            .join(Course, Course.id == Lab.course_id)
            .where(Course.slug == course, Lab.slug == slug)
        ).one()


@pytest.fixture
def course() -> str:
    slug = unique("cc")
    run("course", "create", slug)
    run("lab", "add", slug, str(TEST_LAB), "--due", "2030-01-01T12:00")
    return slug


def test_lab_update_changes_dates_and_policies(course: str) -> None:
    out = run(
        "lab",
        "update",
        course,
        "scale-test",
        "--due",
        "2030-02-01T08:00",
        "--late-policy",
        "refuse",
        "--score-policy",
        "last",
    )
    assert "due 2030-02-01 08:00 UTC" in out and "refuses late" in out and "last" in out
    lab = lab_row(course)
    assert lab.due_at == datetime(2030, 2, 1, 8, 0, tzinfo=UTC)
    assert (lab.late_policy, lab.score_policy) == ("refuse", "last")
    assert "nothing changed" in run(
        "lab", "update", course, "scale-test", "--late-policy", "refuse"
    )
    assert "no due date" in run("lab", "update", course, "scale-test", "--due", "none")
    assert lab_row(course).due_at is None
    assert "accept or refuse" in fails("lab", "update", course, "scale-test", "--late-policy", "x")
    assert "has no lab nope" in fails("lab", "update", course, "nope", "--due", "none")
    out = fails(
        "lab",
        "update",
        course,
        "scale-test",
        "--release",
        "2030-03-01T00:00",
        "--due",
        "2030-02-01T00:00",
    )
    assert "before the release date" in out
    # `lab add` on an existing lab points at `lab update`.
    assert "lab update" in fails("lab", "add", course, str(TEST_LAB))


def test_lab_update_reads_a_changed_lab_folder_again(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(TEST_LAB, tmp_path / "scale-test"))
    slug = unique("rr")
    run("course", "create", slug)
    run("lab", "add", slug, str(folder))
    before = lab_row(slug)
    assert len(before.digest) == 64 and before.max_score == 10
    assert "nothing changed" in run("lab", "update", slug, "scale-test")
    spec = folder / "lab.toml"
    spec.write_text(spec.read_text().replace("points = 6", "points = 9"))
    out = run("lab", "update", slug, "scale-test")
    assert "is worth 13 points (was 10)" in out
    assert (
        f"grades against lab version {lab_row(slug).digest[:12]} (was {before.digest[:12]})" in out
    )
    assert lab_row(slug).max_score == 13 and lab_row(slug).digest != before.digest
    # A changed folder that fails its checks is refused, with them, and nothing is saved.
    (folder / "bad.cu").write_text('extern "C" __global__ void scale() { nope; }\n')
    spec.write_text(spec.read_text() + '\n[[references]]\nname = "bad"\nfile = "bad.cu"\n')
    out = fails("lab", "update", slug, "scale-test", "--due", "2031-01-01T00:00")
    assert "changed and fails its checks, so nothing was saved: reference bad.cu:" in out
    assert lab_row(slug).due_at is None and lab_row(slug).max_score == 13
    spec.write_text(spec.read_text().replace('oracle = "scale"', 'oracle = "scales"'))
    assert "expected.oracle: unknown oracle 'scales'" in fails("lab", "update", slug, "scale-test")


def test_lab_remove_archives_and_restore_brings_it_back(course: str) -> None:
    assert "its submissions are kept" in run("lab", "remove", course, "scale-test")
    assert lab_row(course).archived_at is not None
    assert "already removed" in run("lab", "remove", course, "scale-test")
    export = run("gradebook", "export", course)
    assert "scale-test" not in export.splitlines()[0]  # the gradebook leaves it out
    assert "lab restore" in fails("lab", "add", course, str(TEST_LAB))
    assert "Restored" in run("lab", "restore", course, "scale-test")
    assert lab_row(course).archived_at is None


def test_extensions_are_granted_listed_and_revoked(course: str) -> None:
    email = f"{unique('ext')}@example.edu"
    run("user", "add", email, "--role", "student", "--course", course)
    out = run("extension", "grant", course, "scale-test", email, "--until", "2030-01-03T12:00")
    assert f"{email} may submit scale-test until 2030-01-03 12:00 UTC" in out
    listing = run("extension", "list", course)
    assert f"scale-test\t{email}\t2030-01-03 12:00 UTC\tCLI" in listing
    assert "not after the lab's own due date" in fails(
        "extension", "grant", course, "scale-test", email, "--until", "2029-12-31T00:00"
    )
    outsider = f"{unique('out')}@example.edu"
    other = unique("other")
    run("course", "create", other)
    run("user", "add", outsider, "--role", "student", "--course", other)
    assert "not enrolled" in fails(
        "extension", "grant", course, "scale-test", outsider, "--until", "2030-01-03T12:00"
    )
    assert "Revoked" in run("extension", "revoke", course, "scale-test", email)
    assert "has no extension" in fails("extension", "revoke", course, "scale-test", email)
    assert "no extensions" in run("extension", "list", course)


def test_regrade_queues_a_whole_lab_in_the_background(course: str) -> None:
    email = f"{unique('rg')}@example.edu"
    run("user", "add", email, "--role", "student", "--course", course)
    lab = lab_row(course)
    with session_scope() as session:
        user = find_user(session, email=email)
        assert user is not None
        ids = [make_submission(session, user=user, lab=lab, score=s)[0].id for s in (3, 8)]
    out = run("regrade", course, "scale-test", "--counted-only")
    assert "Queued 1 submission of scale-test" in out and "behind new uploads" in out
    out = run("regrade", course, "scale-test")
    assert "Queued 1 submission" in out and "1 already waiting or grading" in out
    with session_scope() as session:
        priorities = session.scalars(
            select(GradingJob.priority).where(
                GradingJob.submission_id.in_(ids), GradingJob.state == "queued"
            )
        ).all()
    assert sorted(priorities) == [Priority.background.value] * 2


def test_user_add_says_an_instructor(course: str) -> None:
    email = f"{unique('i')}@example.edu"
    out = run("user", "add", email, "--role", "instructor", "--course", course)
    assert f"{email} is an instructor in {course}" in out


@pytest.mark.anyio
async def test_an_invite_link_sets_a_password_once(course: str) -> None:
    from app.main import create_app
    from tests.app.web.test_routes import csrf_of

    email = f"{unique('inv')}@example.edu"
    run("user", "add", email, "--role", "student", "--course", course)
    first = run("user", "invite", email).strip().splitlines()[-1]
    link = run("user", "invite", email, "--days", "2").strip().splitlines()[-1]
    assert link.startswith("http://localhost:8000/invite/") and link != first
    path = link.removeprefix("http://localhost:8000")
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        # The newer link replaced the first one.
        old = await client.get(first.removeprefix("http://localhost:8000"))
        assert old.status_code == 404 and "already used" in old.text
        page = await client.get(path)
        assert page.status_code == 200 and email in page.text
        r = await client.post(
            path,
            data={"password": "short", "confirm": "short", "csrf_token": csrf_of(page.text)},
        )
        assert r.status_code == 422 and "shorter than 8" in r.text
        r = await client.post(
            path,
            data={
                "password": "a fine new password",
                "confirm": "a fine new password",
                "csrf_token": csrf_of(page.text),
            },
        )
        assert r.status_code == 303  # set, and logged in
        assert (await client.get(f"/courses/{course}")).status_code == 200
        again = await client.get(path)
        assert again.status_code == 404
        # Used: said in the student's words, with the ways on (issue 36, item 9).
        assert "already used" in again.text and "`" not in again.text
        assert 'href="/login"' in again.text and 'href="/password/forgot"' in again.text
    with session_scope() as session:
        assert authenticate(session, email=email, password="a fine new password") is not None
        from app.users.models import Invite

        hashes = session.scalars(select(Invite.token_hash)).all()
    token = path.rsplit("/", 1)[1]
    assert token not in hashes  # only a hash of the token is stored
    assert "No user with email" in fails("user", "invite", "nobody@example.edu")


@pytest.mark.anyio
async def test_an_expired_invite_says_so() -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from app.main import create_app
    from app.users.invites import issue_invite
    from app.users.service import ensure_user

    with session_scope() as session:
        user = ensure_user(session, email=f"{unique('old')}@example.edu")
        issued = issue_invite(session, user=user, now=utcnow() - timedelta(days=8), days=7)
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        page = await client.get(issued.url.removeprefix("http://localhost:8000"))
    assert page.status_code == 404 and "This link expired on" in page.text


def test_roster_import_writes_invite_links(course: str, tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    has_pw = f"{unique('pw')}@example.edu"
    fresh = f"{unique('new')}@example.edu"
    roster.write_text(
        f"email,name,password\n{has_pw},Has One,long enough pw\n{fresh},New Student,\n",
        encoding="utf-8",
    )
    links = tmp_path / "links.csv"
    out = run("roster", "import", course, str(roster), "--invites", str(links))
    assert "Enrolled 2 users" in out and "Wrote 1 invite link" in out
    rows = list(csv.DictReader(io.StringIO(links.read_text(encoding="utf-8"))))
    assert [(r["email"], r["name"]) for r in rows] == [(fresh, "New Student")]
    assert re.match(r"^http://localhost:8000/invite/[\w-]{40,}$", rows[0]["link"])
    assert datetime.fromisoformat(rows[0]["expires_at"]) > datetime.now(UTC)


def test_roster_import_writes_no_link_for_an_account_another_course_enrols(
    course: str, tmp_path: Path
) -> None:
    """The links file goes to the course's staff: an account enrolled elsewhere (though it has
    no password yet) is someone else's to hand out, as on the People page (issue 31)."""
    elsewhere = unique("other")
    run("course", "create", elsewhere)
    theirs = f"{unique('theirs')}@example.edu"
    roster = tmp_path / "roster.csv"
    roster.write_text(f"email\n{theirs}\n", encoding="utf-8")
    run("roster", "import", elsewhere, str(roster))
    links = tmp_path / "links.csv"
    out = run("roster", "import", course, str(roster), "--invites", str(links))
    assert "Wrote 0 invite links" in out and "accounts already in use got none" in out
    assert links.read_text(encoding="utf-8").splitlines() == ["email,name,link,expires_at"]


def test_course_create_names_its_instructor_who_can_then_open_it() -> None:
    email = f"{unique('teacher')}@uni.edu"
    slug = unique("made")
    assert f"No user with email {email} exists" in fails(
        "course", "create", slug, "--instructor", email
    )
    with session_scope() as session:
        assert session.scalar(select(Course).where(Course.slug == slug)) is None  # nothing made
        ensure_user(session, email=email, name="Teacher")
    out = run("course", "create", slug, "--title", "GPU 2027", "--instructor", email)
    assert f"Created course {slug}: GPU 2027" in out and f"{email} is its instructor." in out
    with session_scope() as session:
        teacher = find_user(session, email=email)
        assert teacher is not None
        course = get_course(session, slug=slug)
        assert role_in(session, user=teacher, course=course) is Role.instructor
    bare = unique("bare")
    assert "It has no instructor yet" in run("course", "create", bare)
    assert f"{slug}: GPU 2027; {email}" in run("course", "list")
    assert f"{bare}: {bare}; no instructor" in run("course", "list")


def test_course_archive_restore_and_copy(course: str) -> None:
    email = f"{unique('next')}@uni.edu"
    with session_scope() as session:
        ensure_user(session, email=email)
    assert "gone from everyone's list" in run("course", "archive", course)
    assert "archived already; nothing changed" in run("course", "archive", course)
    assert f"{course}: " in run("course", "list") and "(archived 20" in run("course", "list")
    assert f"Restored {course}." in run("course", "restore", course)
    assert "was not archived" in run("course", "restore", course)
    new = unique("copy")
    out = run("course", "copy", course, new, "--instructor", email, "--title", "Next term")
    assert f"Copied {course} to {new}: 1 labs, 0 rubric items." in out
    assert "already exists" in fails("course", "copy", course, new, "--instructor", email)
    with session_scope() as session:
        [lab] = labs_of(session, course=get_course(session, slug=new))
        assert lab.slug == "scale-test" and lab.due_at is None
        assert lab_row(course).due_at is not None
