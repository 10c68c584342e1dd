"""What students and staff see of profiles: findings on lines with their metrics behind a
fold, the ladder, the report file, the history chart, the comparison, the class summary."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.courses.models import Course, Lab, Role
from app.courses.service import add_lab, create_course
from app.courses.specs import spec_for
from app.profiling.models import ProfileState
from app.profiling.service import latest_profile
from tests.app.conftest import Member, make_member, unique
from tests.app.profiling.helpers import (
    PROBE_SOURCE,
    REPORT,
    SUMMARIES,
    graded_transpose,
    keep_references,
    profiled,
)
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


@dataclass
class Class:
    course: Course
    lab: Lab
    student: Member
    other: Member
    ta: Member
    gpu: str
    digest: str


@pytest.fixture
def klass(session: Session) -> Class:
    course = create_course(session, slug=unique("prof"), title="Profiles")
    lab = add_lab(session, course=course, ref="matrix-transpose")
    gpu = unique("NVIDIA H200 ")
    digest = spec_for(lab).digest
    keep_references(session, digest=digest, gpu=gpu)
    found = Class(
        course=course,
        lab=lab,
        student=make_member(session, course, Role.student),
        other=make_member(session, course, Role.student),
        ta=make_member(session, course, Role.ta),
        gpu=gpu,
        digest=digest,
    )
    session.commit()
    return found


def _naive_submission(session: Session, k: Class, member: Member, median_ms: float = 0.5) -> int:
    sub = graded_transpose(session, user=member.user, lab=k.lab, median_ms=median_ms, gpu=k.gpu)
    queued = latest_profile(session, submission_id=sub.id)
    assert queued is not None
    queued.state = ProfileState.failed.value  # superseded by the finished one below
    profiled(session, sub, SUMMARIES["naive"], digest=k.digest, gpu=k.gpu)
    session.commit()
    return sub.id


async def test_the_student_reads_the_findings_on_their_lines_and_the_ladder(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    sid = _naive_submission(session, klass, klass.student)
    await login(client, klass.student)
    page = (await client.get(f"/submissions/{sid}")).text
    assert 'id="profile"' in page
    # The finding, ranked first, linked to its line, with NVIDIA's estimate.
    assert "1. Uncoalesced global memory access" in page
    assert '<a href="#L7">line 7</a>' in page
    assert "only 4.0 bytes are used" in page
    assert "could save up to 77 % of the kernel&#39;s time" in page
    # The metric names stay behind the details fold.
    assert "<summary>details: the metrics behind it</summary>" in page
    assert "<code>memory_l2_theoretical_sectors_global</code>" in page
    # The source line carries the finding.
    assert '<tr id="L7" class="hot">' in page
    assert "▲ Uncoalesced global memory access" in page
    # The ladder: the figures beside naive and tiled, the closest rung and the next one up.
    assert "Your kernel&#39;s profile is closest to the reference naive" in page
    assert "bytes used of each 32-byte sector written: tiled 32.0, yours 4.0." in page
    # matrix-transpose lets students download the report file; no staff button for them.
    assert f"/api/v1/submissions/{sid}/profile.ncu-rep" in page
    assert "Profile again" not in page


async def test_the_api_gives_the_same_profile_as_json(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    sid = _naive_submission(session, klass, klass.student)
    r = await client.get(f"/api/v1/submissions/{sid}/profile", headers=klass.student.auth)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["state"] == "done" and body["gpu"] == klass.gpu
    top = body["findings"][0]
    assert (top["kind"], top["line"]) == ("uncoalesced_global", 7)
    assert round(top["estimated_speedup"]) == 77 and top["speedup_type"] == "global"
    assert top["metrics"]["memory_l2_theoretical_sectors_global"] == "16,777,216"
    assert body["ladder"]["resembles"] == "naive" and body["ladder"]["next_up"] == "tiled"
    assert body["ladder"]["order"] == ["naive", "tiled"]
    report = await client.get(body["report_url"], headers=klass.student.auth)
    assert report.status_code == 200 and report.content == REPORT
    assert report.headers["content-disposition"].endswith(f'"submission-{sid}.ncu-rep"')
    other = await client.get(f"/api/v1/submissions/{sid}/profile", headers=klass.other.auth)
    assert other.status_code == 404


async def test_staff_ask_for_a_profile_and_students_may_not(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    sid = _naive_submission(session, klass, klass.student)
    refused = await client.post(f"/api/v1/submissions/{sid}/profile", headers=klass.student.auth)
    assert refused.status_code == 403
    assert "staff" in refused.json()["detail"]
    asked = await client.post(f"/api/v1/submissions/{sid}/profile", headers=klass.ta.auth)
    assert asked.status_code == 202, asked.text
    again = await client.post(f"/api/v1/submissions/{sid}/profile", headers=klass.ta.auth)
    assert again.status_code == 409
    state = await client.get(f"/api/v1/submissions/{sid}/profile", headers=klass.ta.auth)
    assert state.json()["state"] == "queued"
    assert "after the gradings waiting now" in state.json()["message"]
    # The button on the page, for staff.
    await login(client, klass.ta)
    page = await client.get(f"/submissions/{sid}")
    assert "Profile again" not in page.text  # one is pending
    assert "Nsight Compute profiles it after the gradings waiting now" in page.text


async def test_the_profile_button_queues_one(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    sid = _naive_submission(session, klass, klass.student)
    await login(client, klass.ta)
    page = await client.get(f"/submissions/{sid}")
    assert "Profile again" in page.text
    r = await client.post(f"/submissions/{sid}/profile", data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 303 and r.headers["location"] == f"/submissions/{sid}#profile"
    session.expire_all()
    profile = latest_profile(session, submission_id=sid)
    assert profile is not None and profile.requested_by_id == klass.ta.user.id


async def test_a_lab_that_keeps_reports_for_staff_refuses_students(
    client: httpx.AsyncClient, session: Session
) -> None:
    course = create_course(session, slug=unique("prof"), title="Profiles")
    lab = add_lab(session, course=course, ref="histogram")
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    from tests.app.factories import make_submission

    sub, _ = make_submission(session, user=student.user, lab=lab)
    profiled(session, sub, SUMMARIES["histogram"], digest=spec_for(lab).digest)
    session.commit()
    url = f"/api/v1/submissions/{sub.id}/profile.ncu-rep"
    refused = await client.get(url, headers=student.auth)
    assert refused.status_code == 403 and "only its staff" in refused.json()["detail"]
    assert (await client.get(url, headers=ta.auth)).content == REPORT
    body = (await client.get(f"/api/v1/submissions/{sub.id}/profile", headers=student.auth)).json()
    assert body["report_url"] is None
    assert body["findings"][0]["kind"] == "global_atomics"


async def test_where_it_could_not_run_the_page_says_so_in_one_sentence(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    from graders.profile import tool

    sub = graded_transpose(session, user=klass.student.user, lab=klass.lab, median_ms=0.5)
    profile = latest_profile(session, submission_id=sub.id)
    assert profile is not None
    profile.state = ProfileState.unavailable.value
    profile.message = tool.MIG_SLICE
    session.commit()
    await login(client, klass.student)
    page = (await client.get(f"/submissions/{sub.id}")).text
    assert tool.MIG_SLICE.replace("'", "&#39;") in page
    assert "Test cases" in page and "1. " not in page.split('id="profile"')[1].split("</div>")[0]


async def test_history_marks_the_best_so_far_and_compares_two_submissions(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    slow = _naive_submission(session, klass, klass.student, median_ms=0.5)
    sub = graded_transpose(
        session,
        user=klass.student.user,
        lab=klass.lab,
        median_ms=0.14,
        source=PROBE_SOURCE.replace("transpose_naive", "transpose_better"),
        gpu=klass.gpu,
    )
    profiled(session, sub, SUMMARIES["padded"], digest=klass.digest, gpu=klass.gpu)
    session.commit()
    await login(client, klass.student)
    page = (await client.get(f"/courses/{klass.course.slug}/labs/{klass.lab.slug}/history")).text
    assert 'id="history-chart"' in page and "<svg" in page
    assert page.count("best so far") >= 2  # both improved on the one before
    assert "Uncoalesced global memory access" in page  # the first one's top finding
    assert "of the memory peak" in page  # in the points' hover text
    r = await client.get(f"/api/v1/courses/{klass.course.slug}/labs/{klass.lab.slug}/history",
                         headers=klass.student.auth)  # fmt: skip
    points = r.json()
    assert [p["submission"] for p in points] == [slow, sub.id]
    assert [p["best_so_far"] for p in points] == [True, True]
    assert points[0]["ratios"]["naive"] == pytest.approx(1.0)
    assert points[0]["top_finding"] == "Uncoalesced global memory access"
    assert points[0]["peak_kind"] == "memory" and points[0]["peak_percent"] > 0

    compared = (await client.get(f"/submissions/compare?a={slow}&b={sub.id}")).text
    assert '<tr class="removed">' in compared and '<tr class="added">' in compared
    assert "transpose_better" in compared
    assert "bytes used of each 32-byte sector written" in compared
    assert "Gone in b" in compared and "Uncoalesced global memory access" in compared
    assert 'class="better"' in compared
    # Another student's history, or a comparison with another's submission: refused.
    theirs = _naive_submission(session, klass, klass.other)
    mixed = await client.get(f"/submissions/compare?a={slow}&b={theirs}")
    assert mixed.status_code == 404
    other = await client.get(
        f"/courses/{klass.course.slug}/labs/{klass.lab.slug}/history?user={klass.other.email}"
    )
    assert other.status_code == 403


async def test_staff_see_the_classs_common_findings_with_examples(
    client: httpx.AsyncClient, session: Session, klass: Class
) -> None:
    first = _naive_submission(session, klass, klass.student)
    second = _naive_submission(session, klass, klass.other)
    refused = await client.get(
        f"/api/v1/courses/{klass.course.slug}/labs/{klass.lab.slug}/profiles",
        headers=klass.student.auth,
    )
    assert refused.status_code == 403
    r = await client.get(
        f"/api/v1/courses/{klass.course.slug}/labs/{klass.lab.slug}/profiles",
        headers=klass.ta.auth,
    )
    body = r.json()
    assert (body["students"], body["counted"], body["profiled"]) == (2, 2, 2)
    top = body["findings"][0]
    assert (top["kind"], top["students"], top["share"]) == ("uncoalesced_global", 2, 1.0)
    assert set(top["examples"]) == {f"/submissions/{first}#L7", f"/submissions/{second}#L7"}
    await login(client, klass.ta)
    page = (await client.get(f"/courses/{klass.course.slug}/labs/{klass.lab.slug}/profiles")).text
    assert 'id="common-findings"' in page and "Uncoalesced global memory access" in page
    assert f'href="/submissions/{first}#L7"' in page
    staff_history = await client.get(
        f"/courses/{klass.course.slug}/labs/{klass.lab.slug}/history?user={klass.other.email}"
    )
    assert staff_history.status_code == 200 and klass.other.email in staff_history.text


async def test_a_profile_of_a_hidden_case_waits_for_the_due_date(
    client: httpx.AsyncClient, session: Session, tmp_path: Path
) -> None:
    folder = tmp_path / "scale-test"
    shutil.copytree(Path(__file__).resolve().parents[1] / "labs" / "scale-test", folder)
    with (folder / "lab.toml").open("a", encoding="utf-8") as spec:
        spec.write('\n[profile]\ncase = "n-1048579"\nreport_download = "students"\n')
    course = create_course(session, slug=unique("hidden"), title="Hidden")
    lab = add_lab(session, course=course, ref=str(folder))
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    from tests.app.factories import make_submission

    sub, _ = make_submission(session, user=student.user, lab=lab)
    profile = profiled(session, sub, SUMMARIES["naive"], digest=spec_for(lab).digest)
    profile.case_name = "n-1048579"
    session.commit()
    mine = (await client.get(f"/api/v1/submissions/{sub.id}/profile", headers=student.auth)).json()
    assert mine["state"] == "withheld" and mine["findings"] == [] and mine["report_url"] is None
    assert "shown after the due date" in mine["message"]
    refused = await client.get(
        f"/api/v1/submissions/{sub.id}/profile.ncu-rep", headers=student.auth
    )
    assert refused.status_code == 404
    staff = (await client.get(f"/api/v1/submissions/{sub.id}/profile", headers=ta.auth)).json()
    assert staff["state"] == "done" and staff["findings"]
