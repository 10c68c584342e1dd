"""The pages for running a course, through the app: staff view, settings, extensions, the
leaderboard, the account page, a closed lab, and a submission's performance pictures."""

from __future__ import annotations

import html
import re
import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import LatePolicy
from app.submissions.models import Status
from app.users.service import authenticate
from tests.app.conftest import PASSWORD, TEST_LAB, World, make_world
from tests.app.factories import make_submission, make_timed_submission
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def cells_of_row(page: str, marker: str) -> list[str]:
    """The text of each cell of the one table row that holds `marker`, tags removed."""
    rows = [row for row in page.split("<tr")[1:] if marker in row]
    assert len(rows) == 1, f"{len(rows)} rows hold {marker!r}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[0], re.DOTALL)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in cells]


async def test_the_staff_view_draws_histograms_and_filters(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.5)
    make_submission(session, user=world.other_student.user, lab=world.lab, status=Status.queued)
    session.commit()
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/students"
    await login(client, world.student)
    assert (await client.get(url)).status_code == 403
    client.cookies.clear()
    await login(client, world.ta)
    page = (await client.get(url)).text
    assert page.count("<svg") == 2  # scores, and kernel times on the one GPU model
    assert "Kernel times on H100 SXM5" in page
    assert "submissions.zip" in page and "Regrade all" in page
    # Names shown once when a student has none: the other student has one, so both show.
    assert world.student.user.name in page
    # The other student's only submission is still queued: their counted score reads
    # "pending", not a number (the filter's option is also named "pending": look at the cell).
    assert cells_of_row(page, world.other_student.email)[1] == "pending"
    filtered = (await client.get(url, params={"status": "pending"})).text
    table = filtered.split('id="students"')[1]
    assert world.other_student.email in table and world.student.email not in table


async def test_an_instructor_changes_settings_and_removes_a_lab(
    client: httpx.AsyncClient, world: World
) -> None:
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/settings"
    await login(client, world.ta)
    page = (await client.get(url)).text
    assert "Only instructors change" in page and 'name="due_at"' not in page
    client.cookies.clear()
    await login(client, world.instructor)
    page = (await client.get(url)).text
    r = await client.post(
        url,
        data={
            "csrf_token": csrf_of(page),
            "release_at": "",
            "due_at": "2030-05-01T10:30",
            "late_policy": "refuse",
            "score_policy": "best",
        },
    )
    assert r.status_code == 303
    page = (await client.get(r.headers["location"])).text
    assert "due 2030-05-01 10:30 UTC" in page and "refuses late submissions" in page
    r = await client.post(url.replace("settings", "remove"), data={"csrf_token": csrf_of(page)})
    assert r.status_code == 303
    course = (await client.get(f"/courses/{world.course.slug}")).text
    assert "Removed labs" in course
    client.cookies.clear()
    await login(client, world.student)
    course = (await client.get(f"/courses/{world.course.slug}")).text
    assert world.lab.title not in course
    lab = (await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")).text
    assert "The course staff removed this lab" in lab and 'type="file"' not in lab


async def test_a_closed_lab_says_when_it_closed_and_an_extension_reopens_it(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=3), late_policy=LatePolicy.refuse)
    lab_url = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    await login(client, world.student)
    page = (await client.get(lab_url)).text
    assert "This lab closed at" in page and 'type="file"' not in page
    client.cookies.clear()
    await login(client, world.ta)
    ext = await client.get(f"/courses/{world.course.slug}/extensions")
    until = (utcnow() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    r = await client.post(
        f"/courses/{world.course.slug}/extensions",
        data={
            "csrf_token": csrf_of(ext.text),
            "lab": world.lab.slug,
            "email": world.student.email,
            "until": until,
        },
    )
    assert r.status_code == 303
    listing = (await client.get(r.headers["location"])).text
    assert f"{world.student.email} may submit" in listing
    client.cookies.clear()
    await login(client, world.student)
    page = (await client.get(lab_url)).text
    assert "your extension" in page and 'type="file"' in page
    course = (await client.get(f"/courses/{world.course.slug}")).text
    assert "your extension" in course


async def test_the_submission_page_explains_the_kernels_speed(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    make_timed_submission(session, user=world.other_student.user, lab=world.lab, median_ms=0.02)
    mine = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.004)
    session.commit()
    await login(client, world.student)
    page = (await client.get(f"/submissions/{mine.id}")).text
    perf = page.split('id="performance"')[1]
    # n = 1000: 1000 flops and 8000 bytes in 4 us -> 0.25 GFLOP/s and 2 GB/s.
    assert "0.25 GFLOP/s" in perf and "2 GB/s" in perf
    assert "of the H100 SXM5" in perf and "memory bandwidth" in perf
    assert perf.count("<svg") == 3  # times beside the references, peaks, the class
    assert "your kernel" in perf and "naive" in perf
    # The class: the other student's best (0.02 ms); the viewer is not their own classmate.
    assert "Faster than 1 of 1 classmate's best fully correct time" in html.unescape(perf)
    assert "/api/v1/submissions/" in page and "/source" in page  # the download link


async def test_pending_shows_as_pending_not_zero(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    sub, _ = make_submission(
        session, user=world.student.user, lab=world.lab, status=Status.compiled
    )
    session.commit()
    await login(client, world.student)
    course = (await client.get(f"/courses/{world.course.slug}")).text
    # The lab's row: its score cell says pending and nothing else (the page's legend below the
    # table also holds the word).
    lab, _opens, _due, score = cells_of_row(course, f'/labs/{world.lab.slug}"')
    assert world.lab.title in lab and score == "pending"
    page = (await client.get(f"/submissions/{sub.id}")).text
    assert 'data-status="compiled">Compiled, waiting for a GPU</span>' in page
    assert re.search(r"Score: <span class=\"tag pending\">pending", page)


async def test_the_leaderboard_opt_in_through_the_page(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.3)
    session.commit()
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/leaderboard"
    await login(client, world.student)
    page = (await client.get(url)).text
    assert "Nobody on the leaderboard" in page
    r = await client.post(url, data={"csrf_token": csrf_of(page), "pseudonym": "Coalesced"})
    assert r.status_code == 303
    page = (await client.get(r.headers["location"])).text
    assert "You appear as <strong>Coalesced</strong>" in page
    assert "H100 SXM5" in page and "0.3 ms" in page and "(you)" in page
    r = await client.post(url, data={"csrf_token": csrf_of(page), "pseudonym": "x"})
    assert r.status_code == 422 and "3 to 24" in r.text


async def test_a_logged_in_user_changes_their_password(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.other_student)
    page = (await client.get("/account")).text
    r = await client.post(
        "/account/password",
        data={
            "csrf_token": csrf_of(page),
            "current": "wrong",
            "password": "new long password",
            "confirm": "new long password",
        },
    )
    assert r.status_code == 422 and "current password is not right" in r.text
    r = await client.post(
        "/account/password",
        data={
            "csrf_token": csrf_of(page),
            "current": PASSWORD,
            "password": "new long password",
            "confirm": "new long password",
        },
    )
    assert r.status_code == 303
    assert "was changed" in (await client.get(r.headers["location"])).text
    session.expire_all()
    assert authenticate(session, email=world.other_student.email, password="new long password")


async def test_names_are_shown_once_without_a_display_name(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    world.student.user.name = ""
    make_submission(session, user=world.student.user, lab=world.lab, score=3)
    session.commit()
    await login(client, world.ta)
    book = (await client.get(f"/courses/{world.course.slug}/gradebook")).text
    assert book.count(world.student.email) == 1
    listing = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}/submissions")
    assert listing.text.count(world.student.email) == 1


async def test_docs_are_served_without_a_cdn(client: httpx.AsyncClient) -> None:
    page = (await client.get("/docs")).text
    assert "cdn." not in page and "https://" not in page
    for asset in re.findall(r'(?:src|href)="(/[^"]+)"', page):
        r = await client.get(asset)
        assert r.status_code == 200, asset
        assert len(r.content) > 1000, asset


async def test_saving_settings_reads_a_changed_lab_folder_again(
    client: httpx.AsyncClient, session: Session, tmp_path: Path
) -> None:
    world = make_world(session)
    folder = Path(shutil.copytree(TEST_LAB, tmp_path / "scale-test"))
    world.lab.folder = str(folder.resolve())  # this course's copy of the lab lives here
    session.commit()
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/settings"
    await login(client, world.instructor)
    page = (await client.get(url)).text
    assert f'<code id="lab-digest">{world.lab.digest[:12]}</code>' in page
    form = {"release_at": "", "due_at": "", "late_policy": "accept", "score_policy": "best"}
    spec = folder / "lab.toml"
    spec.write_text(spec.read_text().replace("points = 6", "points = 9"))
    r = await client.post(url, data={"csrf_token": csrf_of(page), **form})
    assert r.status_code == 303
    page = (await client.get(r.headers["location"])).text
    assert "is worth 13 points (was 10)" in html.unescape(page)
    session.refresh(world.lab)
    assert world.lab.max_score == 13
    # A change that breaks the lab: refused with the failed check, nothing saved.
    spec.write_text(spec.read_text() + '\n[[references]]\nname = "bad"\nfile = "bad.cu"\n')
    (folder / "bad.cu").write_text('extern "C" __global__ void scale() { nope; }\n')
    r = await client.post(url, data={"csrf_token": csrf_of(page), **form, "late_policy": "refuse"})
    assert r.status_code == 422
    assert "fails its checks, so nothing was saved: reference bad.cu" in html.unescape(r.text)
    session.refresh(world.lab)
    assert world.lab.late_policy == "accept" and world.lab.max_score == 13


async def test_staff_see_which_lab_version_a_submission_was_graded_against(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    submission, job = make_submission(session, user=world.student.user, lab=world.lab, score=4)
    job.lab_digest = "ab" * 32
    session.commit()
    url = f"/submissions/{submission.id}"
    await login(client, world.ta)
    page = (await client.get(url)).text
    assert 'id="lab-version"' in page and "lab version <code>abababababab</code>" in page
    assert f"the lab is now at <code>{world.lab.digest[:12]}</code>" in page
    api = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.ta.auth)
    assert api.json()["lab_version"] == "ab" * 32
    assert api.json()["lab_version_now"] == world.lab.digest
    client.cookies.clear()
    await login(client, world.student)
    assert 'id="lab-version"' not in (await client.get(url)).text
    api = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.student.auth)
    assert api.json()["lab_version"] is None


async def test_the_lab_page_shows_the_spec_generated_from_lab_toml_after_the_prose(
    client: httpx.AsyncClient, world: World
) -> None:
    await login(client, world.student)
    page = (await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")).text
    prose, generated = page.split('id="lab-spec"')
    assert "Scale a vector" in prose  # lab.md comes first
    assert "<h2>How the grader launches it</h2>" in generated
    assert "extern &quot;C&quot; __global__ void scale(const float* src, float* dst" in generated
    assert "<td>n-1000</td>" in generated and "n-1048579" not in generated  # hidden: a count
    assert "also 1 hidden case" in generated and "Correctness: 10 points" in generated
