"""Issue 20 in a real browser against a real server: teams, late days, a regrade request asked
and answered through the pages, and a similarity report computed by the server's own worker
and read side by side. Screenshots: teams-*, late-days-*, regrade-*, similarity-*."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.core.database import utcnow
from app.courses.service import get_course, get_lab
from app.grading.record import record_report
from app.policy.rules import update_lab
from app.policy.settle import adjust
from app.rubric.service import add_item, grade
from app.similarity.models import SimilarityReport
from app.submissions.credits import credit_submission
from app.submissions.models import GradingJob, JobState, Status, Submission
from app.submissions.service import set_status
from app.teams.service import form_team, invite
from app.users.models import User
from graders.results import GradeReport
from tests.app.browser.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REFERENCES = Path(__file__).resolve().parents[3] / "reference_kernels"

DOT = """\
// dot product: one partial sum per block, then an atomic add
extern "C" __global__ void dot(const float* a, const float* b, float* out, unsigned int n)
{
    __shared__ float partial[256];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float mine = 0.0f;
    for (unsigned int j = i; j < n; j += blockDim.x * gridDim.x) { mine += a[j] * b[j]; }
    partial[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned int width = blockDim.x / 2; width > 0; width >>= 1) {
        if (threadIdx.x < width) { partial[threadIdx.x] += partial[threadIdx.x + width]; }
        __syncthreads();
    }
    if (threadIdx.x == 0) { atomicAdd(out, partial[0]); }
}
"""

OWN = """\
extern "C" __global__ void dot(const float* x, const float* y, float* result, unsigned int count)
{
    float acc = 0.0f;
    for (unsigned int k = blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += gridDim.x * blockDim.x) {
        acc = fmaf(x[k], y[k], acc);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    if ((threadIdx.x & 31) == 0) { atomicAdd(result, acc); }
}
"""


def _graded(session: Any, user: User, lab: Any, source: str, at: Any, score: float) -> int:
    sub = Submission(
        user_id=user.id,
        lab_id=lab.id,
        source_text=source,
        sha256="2" * 64,
        filename="dot.cu",
        created_at=at,
        max_score=lab.max_score,
        late=bool(lab.due_at and at > lab.due_at),
    )
    session.add(sub)
    session.flush()
    credit_submission(session, submission=sub, lab=lab)
    set_status(session, sub, Status.running)
    job = GradingJob(submission_id=sub.id, state=JobState.started.value, queued_at=at)
    session.add(job)
    session.flush()
    report = GradeReport(lab=lab.slug, cases=[], score=score, max_score=lab.max_score, summary="")
    record_report(session, submission=sub, job=job, report=report)
    return sub.id


@pytest.fixture(scope="module")
def policies(server: Server) -> dict[str, int]:
    """The demo course with late days, a team lab with a late team submission, a rubric."""
    with server.session() as session:
        course = get_course(session, slug="demo")
        course.late_days = 3
        course.late_day_cap = 2
        people = {u.email: u for u in session.scalars(select(User))}
        ada, alan, grace = (people[e] for e in ("ada@uni.edu", "alan@uni.edu", "grace@uni.edu"))
        barbara = people["barbara@uni.edu"]
        lab = get_lab(session, course=course, slug="dot-product")
        lab.team_size = 2
        lab.late_penalty = 10
        update_lab(session, lab=lab, due_at=utcnow() - timedelta(hours=20))
        now = utcnow()
        form_team(
            session,
            course=course,
            lab=lab,
            name="Warp Nine",
            emails=[ada.email, alan.email],
            by=None,
            now=now,
        )
        form_team(
            session,
            course=course,
            lab=lab,
            name="Bank Conflict",
            emails=[barbara.email],
            by=None,
            now=now,
        )
        invite(session, course=course, lab=lab, user=barbara, email=grace.email, now=now)
        ids = {
            "team": _graded(session, ada, lab, DOT, now - timedelta(hours=2), 8),
            "copy": _graded(
                session, barbara, lab, DOT.replace("mine", "sum"), now - timedelta(hours=3), 8
            ),
            "own": _graded(session, people["claude@uni.edu"], lab, OWN, now - timedelta(days=1), 9),
        }
        adjust(
            session,
            course=course,
            student=grace,
            delta=1,
            reason="documented illness",
            by=None,
            now=now,
        )
        matmul = get_lab(session, course=course, slug="matmul-tiled")
        item = add_item(session, lab=matmul, title="Code quality", max_points=5)
        grade(
            session,
            course=course,
            lab=matmul,
            student=ada,
            scores={item.id: (4.0, "Clear names; explain the tile size.")},
            by=None,
            now=now,
        )
        session.commit()
    return ids


def test_teams_as_staff_and_as_a_student(visitor: Any, server: Server, policies: dict) -> None:
    ta = visitor()
    ta.login(server.people.ta)
    ta.go("/courses/demo/labs/dot-product/teams")
    table = ta.page.inner_text("#teams")
    assert "Warp Nine" in table and "Bank Conflict" in table and "grace@uni.edu" in table
    ta.shot("teams-staff-desktop")
    grace = visitor()
    grace.login(server.people.unnamed)
    grace.go("/courses/demo/labs/dot-product/teams")
    assert "Bank Conflict" in grace.page.inner_text("#invitations")
    grace.shot("teams-invited-student-desktop")
    grace.page.click("#invitations button[value=accept]")
    grace.page.wait_for_selector("#message")
    assert "You joined Bank Conflict" in grace.page.inner_text("#message")
    ada = visitor()
    ada.login(server.people.student)
    ada.go("/courses/demo/labs/dot-product/teams")
    assert "Warp Nine" in ada.page.inner_text("#my-team")
    ada.shot("teams-student-desktop")
    # The team's submission counts for Alan too, on the staff's view of the lab.
    ta.go("/courses/demo/gradebook")
    assert ta.outside == [] and grace.outside == [] and ada.outside == []


def test_late_days_as_a_student_and_as_staff(visitor: Any, server: Server, policies: dict) -> None:
    ada = visitor()
    ada.login(server.people.student)
    ada.go("/courses/demo/late-days")
    # The team's submission was 18 hours late: one day spent, for Ada and for Alan.
    assert ada.page.inner_text("#left") == "2"
    assert "dot-product" in ada.page.inner_text("#history")
    ada.shot("late-days-student-desktop")
    phone = visitor(width=390, height=844)
    phone.login(server.people.student)
    phone.go("/courses/demo/late-days")
    assert phone.sideways_overflow() == 0
    phone.shot("late-days-student-390", full_page=False)
    ta = visitor()
    ta.login(server.people.ta)
    ta.go("/courses/demo/late-days")
    balances = ta.page.inner_text("#balances")
    assert "alan@uni.edu" in balances and "grace@uni.edu" in balances
    ta.page.select_option("#adjust select[name=email]", "ada@uni.edu")
    ta.page.fill("#adjust input[name=days]", "1")
    ta.page.fill("#adjust input[name=reason]", "conference travel")
    ta.page.click("#adjust button[type=submit]")
    ta.page.wait_for_selector("#message")
    assert "ada@uni.edu now has 3 late days left" in ta.page.inner_text("#message")
    ta.shot("late-days-staff-desktop")


def test_a_regrade_request_asked_and_answered(visitor: Any, server: Server, policies: dict) -> None:
    ada = visitor()
    ada.login(server.people.student)
    ada.go(f"/submissions/{server.ids['ada_matmul']}")
    ada.page.select_option("#regrade-case", "square-1023")
    ada.page.fill(
        "#regrade-text", "My kernel guards the last partial tile; could the 1023 case be re-run?"
    )
    ada.page.click("#ask-regrade button[type=submit]")
    ada.page.wait_for_url("**/regrade-requests/*")
    request_url = ada.page.url.removeprefix(server.base)
    assert "open" in ada.page.inner_text("#state")
    ada.shot("regrade-request-student-desktop")
    ta = visitor()
    ta.login(server.people.ta)
    ta.go("/courses/demo/labs/matmul-tiled/regrade-requests")
    assert "partial tile" in ta.page.inner_text("#queue")
    ta.shot("regrade-queue-staff-desktop")
    ta.go(request_url)
    ta.page.fill("#answer-form textarea[name=answer]", "Checked by hand: correct. Two points back.")
    ta.page.fill("#answer-form input[name=points]", "2")
    ta.page.click("#answer-form button[value=adjust]")
    ta.page.wait_for_selector("#message")
    ta.shot("regrade-request-answered-staff-desktop")
    ada.go(request_url)
    assert "Two points back" in ada.page.inner_text("#answer")
    ada.go(f"/submissions/{server.ids['ada_matmul']}")
    assert "+2" in ada.page.inner_text("#adjustment")
    ada.shot("regrade-answer-on-submission-desktop")


# Whether a highlight starts or ends inside a name or a number: the letters on both sides of
# each of its edges.
CUT_WORDS = """() => [...document.querySelectorAll("#side-a mark, #side-b mark")].flatMap(m => {
    const before = (m.previousSibling && m.previousSibling.textContent) || "";
    const after = (m.nextSibling && m.nextSibling.textContent) || "";
    const word = c => /[A-Za-z0-9_]/.test(c || "");
    const text = m.textContent, cuts = [];
    if (word(before.slice(-1)) && word(text[0])) cuts.push(before.slice(-8) + "|" + text);
    if (word(text.slice(-1)) && word(after[0])) cuts.push(text + "|" + after.slice(0, 8));
    return cuts;
})"""


def test_a_similarity_report_computed_by_the_worker(
    visitor: Any, server: Server, policies: dict
) -> None:
    reference = (REFERENCES / "dot-product" / "tiled_dot.cu").read_text(encoding="utf-8")
    with server.session() as session:
        lab = get_lab(session, course=get_course(session, slug="demo"), slug="dot-product")
        people = {u.email: u for u in session.scalars(select(User))}
        # Two students hand in the lab's own reference: invisible to the pairs (boilerplate).
        for who in ("donald@uni.edu", "edsger@uni.edu"):
            _graded(session, people[who], lab, reference, utcnow() - timedelta(hours=1), 9)
        # The team's kernel summing integers: copydetect's shared ranges start inside "float".
        frances = people["frances@uni.edu"]
        _graded(
            session, frances, lab, DOT.replace("float", "int"), utcnow() - timedelta(hours=1), 5
        )
        session.commit()
    ta = visitor()
    ta.login(server.people.ta)
    sim = "/courses/demo/labs/dot-product/similarity"
    ta.go(sim)
    with ta.page.expect_navigation():
        ta.page.click("#run button[type=submit]")
    # The server's local worker takes the job; the page follows it and shows the pairs once it
    # is done, with no reload by hand.
    ta.page.wait_for_selector("#pairs", timeout=60_000)
    # The team's copy heads the list; Claude's own kernel shares only the algorithm's shape.
    top = ta.page.inner_text("#pairs tr >> nth=1")
    assert "barbara@uni.edu" in top and "ada@uni.edu, alan@uni.edu" in top and "100%" in top
    copies = ta.page.locator("#reference-copies li")
    assert copies.count() == 2, ta.page.inner_text("main")
    for i, who in enumerate(("donald@uni.edu", "edsger@uni.edu")):
        line = copies.nth(i).inner_text()
        assert who in line and "100%" in line and "tiled_dot.cu" in line, line
    # A reload says where the report stands now: done, never the "queued" of the moment it was
    # asked for.
    ta.page.reload()
    assert "queued" not in ta.page.inner_text("main")
    assert ta.page.locator("#report-state").count() == 0
    assert ta.axe() == []
    ta.shot("similarity-report-desktop")
    ta.page.click("#pairs a >> nth=0")
    ta.page.wait_for_selector("#side-a mark")
    assert "partial[threadIdx.x]" in ta.page.inner_text(
        "#side-a mark >> nth=0"
    ) + ta.page.inner_text("#side-a")
    ta.shot("similarity-pair-desktop")
    # A pair that shares part of its code: the highlights start and end on whole words.
    ta.go(sim)
    partial = ta.page.locator("#pairs tr", has_text="frances@uni.edu").first
    partial.locator("a").click()
    ta.page.wait_for_selector("#side-a mark")
    assert ta.page.evaluate(CUT_WORDS) == []
    ta.shot("similarity-pair-partial-desktop")
    assert ta.axe() == []
    phone = visitor(width=390, height=844)
    phone.login(server.people.ta)
    for path in (sim, ta.page.url.removeprefix(server.base)):
        phone.go(path)
        assert phone.axe() == [], path
        assert phone.sideways_overflow() == 0, path
        phone.shot("similarity-" + ("report" if path == sim else "pair") + "-390")
    student = visitor()
    student.login(server.people.student)
    response = student.page.goto(server.base + sim)
    assert response is not None and response.status == 403


def test_a_similarity_report_state_without_javascript(visitor: Any, server: Server) -> None:
    """Without JavaScript the page shows the report's real state on each load, and says to
    reload it."""
    with server.session() as session:
        lab = get_lab(session, course=get_course(session, slug="demo"), slug="hadamard")
        # Queued, and sent just now: no worker computes it, so it stays queued meanwhile.
        report = SimilarityReport(lab_id=lab.id, created_at=utcnow(), sent_at=utcnow())
        session.add(report)
        session.commit()
        report_id = report.id
    ta = visitor(javascript=False)
    ta.login(server.people.ta)
    ta.go("/courses/demo/labs/hadamard/similarity")
    state = ta.page.inner_text("#report-state")
    assert f"Report {report_id} is queued for a worker" in state and "reload it to see" in state
    assert "by itself" not in state
    assert ta.page.locator("#run button[type=submit]").is_disabled()
    with server.session() as session:
        done = session.get_one(SimilarityReport, report_id)
        done.state = "done"
        done.finished_at = utcnow()
        done.stats = {"submissions": 0, "past_submissions": 0, "boilerplate_files": 1}
        session.commit()
    ta.go("/courses/demo/labs/hadamard/similarity")
    assert ta.page.locator("#report-state").count() == 0
    assert f"Report {report_id}: done" in ta.page.inner_text("#reports")
    assert "No pair shares" in ta.page.inner_text("#pairs")
