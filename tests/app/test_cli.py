"""The `kernelgrader` command, through Typer's CliRunner against the test database."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.core.database import session_scope
from app.users.service import authenticate
from tests.app.conftest import TEST_LAB, unique

runner = CliRunner()


def run(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def fails(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 1, result.output
    return result.output


@pytest.fixture
def course() -> str:
    slug = unique("cli")
    assert f"Created course {slug}" in run("course", "create", slug, "--title", "CLI course")
    return slug


def test_db_upgrade_is_repeatable() -> None:
    assert "newest schema" in run("db", "upgrade")
    assert "newest schema" in run("db", "upgrade")


def test_course_create_refuses_a_duplicate(course: str) -> None:
    assert "already exists" in fails("course", "create", course)


def test_lab_add_takes_a_folder_or_a_builtin_id(course: str) -> None:
    out = run("lab", "add", course, str(TEST_LAB), "--due", "2030-01-01T12:00", "--policy", "last")
    assert "Added lab scale-test" in out and "max score 10" in out
    assert "Added lab vector-scale" in run("lab", "add", course, "vector-scale")
    assert "neither a lab folder nor a built-in lab" in fails("lab", "add", course, "no-such-lab")
    assert "already has a lab scale-test" in fails("lab", "add", course, str(TEST_LAB))
    assert "is not a date" in fails("lab", "add", course, "matmul-naive", "--due", "friday")


def test_lab_add_may_name_the_gpu_model_its_timings_belong_to(course: str) -> None:
    from sqlalchemy import select

    from app.courses.models import Lab

    out = run("lab", "add", course, "matmul-naive", "--gpu-model", " H100 PCIe ")
    assert "Its timings belong to H100 PCIe GPUs." in out
    with session_scope() as session:
        models = session.scalars(select(Lab.gpu_model).where(Lab.slug == "matmul-naive")).all()
        assert "H100 PCIe" in models


def test_user_add_and_roster_import(course: str, tmp_path: Path) -> None:
    email = f"{unique('ada')}@example.edu"
    assert f"{email} is a ta in {course}" in run(
        "user", "add", email, "--role", "ta", "--course", course, "--password", "long enough pw"
    )
    assert "student, ta or instructor" in fails(
        "user", "add", email, "--role", "dean", "--course", course
    )
    roster = tmp_path / "roster.csv"
    first = f"{unique('s')}@example.edu"
    roster.write_text(
        "email,name,role,password\n"
        f"{first},Student One,,first password\n"
        f"{unique('s')}@example.edu,Student Two,student,\n"
        f"{unique('t')}@example.edu,Tutor,ta,\n",
        encoding="utf-8",
    )
    assert f"Enrolled 3 users in {course}" in run("roster", "import", course, str(roster))
    with session_scope() as session:
        assert authenticate(session, email=first, password="first password") is not None
    roster.write_text(f"email,password\n{first},short\n", encoding="utf-8")
    assert "Roster line 2: The password is shorter than 8" in fails(
        "roster", "import", course, str(roster)
    )
    roster.write_text("name\nNobody\n", encoding="utf-8")
    assert "no 'email' column" in fails("roster", "import", course, str(roster))
    export = run("gradebook", "export", course)
    names = [row[1] for row in csv.reader(io.StringIO(export))][1:]
    assert sorted(names) == ["Student One", "Student Two"]  # students only


@pytest.mark.anyio
async def test_token_create_prints_a_working_token_last(course: str) -> None:
    from app.main import create_app

    email = f"{unique('tok')}@example.edu"
    run("user", "add", email, "--role", "student", "--course", course)
    token = run("token", "create", email).strip().splitlines()[-1]
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        r = await client.get(
            f"/api/v1/courses/{course}/labs", headers={"Authorization": f"Bearer {token}"}
        )
    assert r.status_code == 200
    assert "No user with email" in fails("token", "create", "nobody@example.edu")
    # The operator setting a new password for the account revokes its tokens (issue 31).
    run("user", "add", email, "--role", "student", "--course", course, "--password", "x" * 12)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        r = await client.get(
            f"/api/v1/courses/{course}/labs", headers={"Authorization": f"Bearer {token}"}
        )
    assert r.status_code == 401


def test_gradebook_export_to_a_file(course: str, tmp_path: Path) -> None:
    out = tmp_path / "book.csv"
    assert "Wrote" in run("gradebook", "export", course, "--output", str(out))
    assert out.read_text(encoding="utf-8").startswith("student_id,name,email,")
    assert "There is no course named nope." in fails("gradebook", "export", "nope")


def test_unusable_settings_are_refused_in_a_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core.settings import DEV_SECRET_KEY, get_settings

    monkeypatch.setenv("KERNELGRADER_ENV", "production")
    monkeypatch.setenv("KERNELGRADER_SECRET_KEY", DEV_SECRET_KEY)
    get_settings.cache_clear()
    try:
        result = runner.invoke(cli, ["gradebook", "export", "demo"])
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert result.exit_code == 2
    assert "KERNELGRADER_SECRET_KEY is still the development default" in result.output
    assert "Traceback" not in result.output


def test_text_longer_than_its_column_is_refused_with_a_sentence(course: str) -> None:
    # PostgreSQL refuses it with a traceback, SQLite stores it whole: both get a sentence now.
    assert "longer than 200" in fails("course", "create", unique("long"), "--title", "T" * 201)
    email = f"{unique('long')}@example.edu"
    out = fails("user", "add", email, "--role", "student", "--course", course, "--name", "N" * 201)
    assert "longer than 200" in out
    run("user", "add", email, "--role", "student", "--course", course)
    assert "longer than 100" in fails("token", "create", email, "--name", "x" * 101)


def test_a_due_date_with_an_offset_is_the_same_instant_in_utc(course: str) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import select

    from app.courses.models import Course, Lab

    # 00:30 in UTC+02:00 is 22:30 UTC the day before; without an offset the time is UTC.
    run("lab", "add", course, str(TEST_LAB), "--due", "2030-01-02T00:30+02:00")
    run("lab", "add", course, "vector-scale", "--due", "2030-01-01T22:30")
    with session_scope() as session:
        labs = session.scalars(
            select(Lab).join(Course, Course.id == Lab.course_id).where(Course.slug == course)
        ).all()
        due = {lab.slug: lab.due_at for lab in labs}
    expected = datetime(2030, 1, 1, 22, 30, tzinfo=UTC)
    assert due == {"scale-test": expected, "vector-scale": expected}
    assert all(d is not None and d.utcoffset() is not None for d in due.values())


def test_lab_check_reports_each_check_and_passes_a_good_lab() -> None:
    out = run("lab", "check", str(TEST_LAB), "--no-gpu")
    assert f"Checking the lab folder {TEST_LAB}:" in out
    assert "ok    spec: lab.toml loads (2 cases, 0 references, 0 faulty kernels)" in out
    assert "The lab scale-test passed the checks that need no GPU." in out
    assert "is not a folder" in fails("lab", "check", str(TEST_LAB / "lab.toml"))


def _broken_copy(tmp_path: Path) -> Path:
    """The test lab with a reference that does not compile."""
    import shutil

    folder = Path(shutil.copytree(TEST_LAB, tmp_path / "scale-test"))
    spec = (folder / "lab.toml").read_text(encoding="utf-8")
    (folder / "lab.toml").write_text(
        spec + '\n[[references]]\nname = "mine"\nfile = "mine.cu"\n', encoding="utf-8"
    )
    (folder / "mine.cu").write_text(
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor) { dst[0] = oops; }\n",
        encoding="utf-8",
    )
    return folder


def test_lab_check_fails_a_lab_whose_reference_does_not_compile(tmp_path: Path) -> None:
    out = fails("lab", "check", str(_broken_copy(tmp_path)), "--no-gpu")
    assert "fail  reference mine.cu: does not compile: The compiler reported 1 error" in out
    assert "1 check failed for scale-test; fix it and run `kernelgrader lab check` again." in out


def test_lab_add_refuses_a_lab_folder_that_fails_its_check(course: str, tmp_path: Path) -> None:
    folder = _broken_copy(tmp_path)
    out = fails("lab", "add", course, str(folder))
    assert "reference mine.cu: does not compile" in out
    assert f"The lab was not added; check it with `kernelgrader lab check {folder}`." in out
    assert "Added lab scale-test" in run("lab", "add", course, str(TEST_LAB))
