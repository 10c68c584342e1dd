"""The CLI for issue 20: course policies, teams, late days, rubric, regrade requests,
similarity."""

from __future__ import annotations

from pathlib import Path

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
    course, (a, _, _) = _course()
    out = run("rubric", "add", course, "scale-test", "Report", "5")
    item = out.split()[2]
    assert run("rubric", "grade", course, "scale-test", a, item, "4").startswith(a)
    assert "outside 0 to 5" in fails("rubric", "grade", course, "scale-test", a, item, "6")
    assert "No open regrade requests" in run("regrade-request", "list", course, "scale-test")
    out = run("similarity", "run", course, "scale-test")
    report = out.split()[1]
    assert "queued" in run("similarity", "show", report)
