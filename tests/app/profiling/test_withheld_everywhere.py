"""A profile of a hidden case stays withheld from students wherever it could show until the lab's
grades are released (issue 31, class 13): the submission's page and API said "withheld", but
the history page, its API ("top finding") and /submissions/compare (findings and figures) read
the same profile without asking. Staff see it all; after the release the student does too."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Role
from app.courses.service import add_lab, create_course
from app.courses.specs import spec_for
from tests.app.conftest import make_member, unique
from tests.app.factories import make_submission
from tests.app.profiling.helpers import SUMMARIES, profiled
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio

HIDDEN = "n-1048579"  # the scale-test lab's hidden case
FINDING = "Uncoalesced global memory access"  # the naive probe's top finding


async def test_a_hidden_cases_profile_shows_nowhere_to_the_student_before_release(
    client: httpx.AsyncClient, session: Session, tmp_path: Path
) -> None:
    folder = tmp_path / "scale-test"
    shutil.copytree(Path(__file__).resolve().parents[1] / "labs" / "scale-test", folder)
    with (folder / "lab.toml").open("a", encoding="utf-8") as spec:
        spec.write(f'\n[profile]\ncase = "{HIDDEN}"\n')
    course = create_course(session, slug=unique("withheld"), title="Withheld")
    lab = add_lab(session, course=course, ref=str(folder), due_at=utcnow() + timedelta(days=2))
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    digest = spec_for(lab).digest
    ids = []
    for probe, minutes in (("naive", 20), ("padded", 10)):
        sub, _ = make_submission(
            session, user=student.user, lab=lab, created_at=utcnow() - timedelta(minutes=minutes)
        )
        profile = profiled(session, sub, SUMMARIES[probe], digest=digest)
        profile.case_name = HIDDEN
        ids.append(sub.id)
    session.commit()
    history = f"/api/v1/courses/{course.slug}/labs/{lab.slug}/history"
    compare = f"/submissions/compare?a={ids[0]}&b={ids[1]}"

    # The student, before the release: withheld on every page and API.
    points = (await client.get(history, headers=student.auth)).json()
    assert [p["top_finding"] for p in points] == ["", ""]
    assert [p["profile_withheld"] for p in points] == [True, True]
    await login(client, student)
    page = (await client.get(f"/courses/{course.slug}/labs/{lab.slug}/history")).text
    assert FINDING not in page and "withheld: profiled on a hidden case" in page
    compared = await client.get(compare)
    assert compared.status_code == 200
    assert FINDING not in compared.text
    assert "bytes used of each 32-byte sector written" not in compared.text  # a figure's row
    assert "profile ran on a hidden case" in compared.text
    mine = (await client.get(f"/api/v1/submissions/{ids[0]}/profile", headers=student.auth)).json()
    assert mine["state"] == "withheld" and mine["findings"] == []

    # The staff see it all, now.
    staff = (await client.get(f"{history}?user={student.email}", headers=ta.auth)).json()
    assert staff[0]["top_finding"] == FINDING and not staff[0]["profile_withheld"]
    await login(client, ta)
    assert FINDING in (await client.get(compare)).text

    # Released: the student reads it too.
    lab.grades_released_at = utcnow() - timedelta(minutes=1)
    session.commit()
    points = (await client.get(history, headers=student.auth)).json()
    assert points[0]["top_finding"] == FINDING and not points[0]["profile_withheld"]
    await login(client, student)
    released = (await client.get(compare)).text
    assert FINDING in released and "bytes used of each 32-byte sector written" in released
