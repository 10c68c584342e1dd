"""The CLI for issue 20: course policies, teams, late days, rubric, regrade requests,
similarity."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sqlalchemy import select

from tests.app.conftest import TEST_LAB, unique
from tests.app.test_cli_course import fails, run


def _course() -> tuple[str, list[str]]:
    slug = unique("pc")
    run("course", "create", slug)
    run("lab", "add", slug, str(TEST_LAB), "--due", "2020-01-01T12:00")
    emails = [f"{unique('s')}@example.edu" for _ in range(3)]
    for email in emails:
        run("user", "add", email, "--role", "student", "--course", slug)
    run("user", "add", f"{unique('i')}@example.edu", "--role", "instructor", "--course", slug)
    return slug, emails


def test_policies_teams_and_late_days(tmp_path: Path) -> None:
    course, (a, b, c) = _course()
    out = run("course", "policies", course, "--late-days", "3", "--late-day-cap", "2")
    assert "gives 3 late days per student" in out and "caps late days at 2 per lab" in out
    assert "0 to 365" in fails("course", "policies", course, "--late-days", "-2")
    assert "3 late days per student" in run("course", "policies", course)
    out = run(
        "lab",
        "update",
        course,
        "scale-test",
        "--team-size",
        "2",
        "--late-penalty",
        "10",
        "--release-grades",
        "now",
    )
    assert "is done in teams of up to 2" in out and "releases its grades at" in out
    assert "Team Blue of scale-test" in run("team", "set", course, "scale-test", "Blue", a, b)
    roster = tmp_path / "teams.csv"
    roster.write_text(f"team,email\nRed,{c}\nRed,nobody@example.edu\n")
    out = fails("team", "import", course, "scale-test", str(roster))
    assert "line 3: nobody@example.edu is not enrolled" in out
    assert run("team", "list", course, "scale-test").strip() == f"Blue: {', '.join(sorted([a, b]))}"
    out = run("latedays", "adjust", course, a, "1", "--reason", "illness")
    assert f"{a} now has 4 late days left" in out
    assert "illness" in run("latedays", "show", course, a)
    assert "Say why" in fails("latedays", "adjust", course, a, "1", "--reason", " ")


def test_rubric_requests_and_similarity() -> None:
    from app.core.database import session_scope
    from app.courses.models import Course, Lab
    from app.similarity.tasks import compute
    from app.users.service import find_user
    from tests.app.factories import make_submission
    from tests.app.similarity.test_similarity import OTHER, SHARED

    course, (a, b, c) = _course()
    # Three students' work, graded: a's and b's share a kernel, c's is their own.
    with session_scope() as session:
        lab = session.scalars(
            select(Lab).join(Course, Course.id == Lab.course_id).where(Course.slug == course)
        ).one()
        for email, source, score in (
            (a, SHARED, 6),
            (b, SHARED.replace("value", "v"), 7),
            (c, OTHER, 8),
        ):
            user = find_user(session, email=email)
            assert user is not None
            made, _ = make_submission(session, user=user, lab=lab, score=score)
            made.source_text = source
    out = run("rubric", "add", course, "scale-test", "Report", "5")
    item = out.split()[2]
    assert run("rubric", "grade", course, "scale-test", a, item, "5").startswith(a)
    assert "outside 0 to 5" in fails("rubric", "grade", course, "scale-test", a, item, "6")
    assert "outside 0 to 5" in fails("rubric", "grade", course, "scale-test", b, item, "--", "-1")
    # The gradebook adds the rubric points to the counted score: a's 6 + 5; b's none given.
    book = {row[2]: row for row in csv.reader(io.StringIO(run("gradebook", "export", course)))}
    assert (book[a][3], book[b][3], book[c][3]) == ("11", "7", "8")
    assert "No open regrade requests" in run("regrade-request", "list", course, "scale-test")
    out = run("similarity", "run", course, "scale-test")
    report = out.split()[1]
    assert "queued" in run("similarity", "show", report)
    # The worker's task (sent to the broker by the command), run here; then the pair is listed.
    assert compute.apply(args=[int(report)]).get() == "done"
    shown = run("similarity", "show", report).splitlines()
    assert shown[0] == f"Report {report}: done"
    # Most similar first: a's and b's copy, then c's own kernel, which shares only the lab's
    # signature and loop with theirs.
    assert shown[1] == f"  1. 100% / 100%  {a}  <->  {b}", shown
    for line in shown[2:]:
        shares = [int(p.rstrip("%")) for p in line.split()[1:4:2]]
        assert c in line and max(shares) < 50, shown
