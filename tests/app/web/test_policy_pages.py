"""Issue 20's pages through the web login: teams, late days, regrade requests, rubric and
similarity, as staff and as a student (who never sees the staff's pages)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Role
from app.courses.service import add_lab
from app.rubric.service import add_item
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def _world(session: Session) -> World:
    world = make_world(session, due_at=utcnow() - timedelta(hours=30))
    world.lab.team_size = 2
    world.course.late_days = 2
    session.commit()
    return world


async def test_staff_form_a_team_and_a_bad_roster_is_a_sentence(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = _world(session)
    await login(client, world.ta)
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/teams"
    page = await client.get(url)
    assert page.status_code == 200 and "Teams of up to 2" in page.text
    r = await client.post(
        url,
        data={
            "csrf_token": csrf_of(page.text),
            "action": "form",
            "name": "Blue",
            "members": f"{world.student.email}\n{world.other_student.email}",
        },
    )
    assert r.status_code == 303, r.text
    assert "Blue" in (await client.get(url)).text
    r = await client.post(
        url,
        data={
            "csrf_token": csrf_of(page.text),
            "action": "import",
            "roster": f"team,email\nRed,{world.outsider.email}\n",
        },
    )
    assert r.status_code == 422
    assert "is not enrolled" in r.text


async def test_a_student_sees_their_late_days_and_team(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = _world(session)
    await login(client, world.student)
    page = await client.get(f"/courses/{world.course.slug}/late-days")
    assert page.status_code == 200
    assert '<strong id="left">2</strong> of 2 late days left' in page.text
    assert "Adjust a student" not in page.text
    course = await client.get(f"/courses/{world.course.slug}")
    assert "Late days: 2 left" in course.text
    teams = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}/teams")
    assert "Start a team" in teams.text
    for staff_only in ("rubric", "similarity", "regrade-requests"):
        r = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}/{staff_only}")
        assert r.status_code == 403, staff_only


async def test_a_regrade_request_through_the_pages(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = _world(session)
    world.lab.due_at = utcnow() + timedelta(days=1)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=5)
    session.commit()
    await login(client, world.student)
    page = await client.get(f"/submissions/{sub.id}")
    assert "Ask for a regrade" in page.text
    r = await client.post(
        f"/submissions/{sub.id}/regrade-requests",
        data={"csrf_token": csrf_of(page.text), "text": "The second case looks wrong."},
    )
    assert r.status_code == 303
    request_url = r.headers["location"]
    mine = await client.get(request_url)
    assert "The second case looks wrong." in mine.text and "Withdraw" in mine.text
    # A second request while the first is open is refused on the submission's own page, with
    # the sentence at the top and the student's words still in the box.
    page = await client.get(f"/submissions/{sub.id}")
    again = await client.post(
        f"/submissions/{sub.id}/regrade-requests",
        data={"csrf_token": csrf_of(page.text), "text": "And the first case, too."},
    )
    assert again.status_code >= 400 and f"Submission {sub.id}" in again.text
    assert 'id="error" role="alert"' in again.text
    assert ">And the first case, too.</textarea>" in again.text
    staff = httpx.AsyncClient(transport=client._transport, base_url="http://testserver")
    async with staff:
        await login(staff, world.instructor)
        queue = await staff.get(
            f"/courses/{world.course.slug}/labs/{world.lab.slug}/regrade-requests"
        )
        assert "The second case looks wrong." in queue.text
        form = await staff.get(request_url)
        r = await staff.post(
            request_url,
            data={
                "csrf_token": csrf_of(form.text),
                "action": "decline",
                "answer": "It is right: see the hidden case's size.",
            },
        )
        assert r.status_code == 303
    answered = await client.get(request_url)
    assert "It is right: see the hidden case" in answered.text
    assert 'id="state">declined' in answered.text


# A kernel of the third student's own, like nobody else's in any test's copy of the lab.
OWN = """\
extern "C" __global__ void scale(const float* p, float* q, unsigned int len, float c)
{
    int idx = (int)(threadIdx.x) + (int)(blockIdx.x) * (int)(blockDim.x);
    if (idx < (int)len) { q[idx] = __fmul_rn(p[idx], c); }
}
"""


async def test_rubric_and_similarity_pages_for_staff(
    client: httpx.AsyncClient, session: Session
) -> None:
    from app.similarity.tasks import compute
    from tests.app.similarity.test_similarity import SHARED

    world = _world(session)
    add_item(session, lab=world.lab, title="Report", max_points=4)
    make_submission(session, user=world.student.user, lab=world.lab, score=6)
    lab = add_lab(session, course=world.course, ref="vector-scale")
    third = make_member(session, world.course, Role.student)
    for member, source in (
        (world.student, SHARED),
        (world.other_student, SHARED.replace("value", "v")),
        (third, OWN),
    ):
        made, _ = make_submission(session, user=member.user, lab=lab, score=10)
        made.source_text = source
    session.commit()
    await login(client, world.ta)
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}/rubric"
    page = await client.get(f"{url}?email={world.student.email}")
    assert page.status_code == 200 and "Grade a student" in page.text
    item = page.text.split('name="points_')[1].split('"')[0]
    r = await client.post(
        url,
        data={
            "csrf_token": csrf_of(page.text),
            "action": "grade",
            "email": world.student.email,
            f"points_{item}": "3.5",
            f"comment_{item}": "Clear.",
        },
    )
    assert r.status_code == 303, r.text
    assert 'value="3.5"' in (await client.get(f"{url}?email={world.student.email}")).text
    # Points past the item's maximum are a sentence on the page, and change nothing.
    over = await client.post(
        url,
        data={
            "csrf_token": csrf_of(page.text),
            "action": "grade",
            "email": world.student.email,
            f"points_{item}": "4.5",
        },
    )
    assert over.status_code == 422 and "4.5 is outside 0 to 4 points" in over.text
    # The gradebook counts them: the autograde's 6 and the rubric's 3.5.
    book = await client.get(f"/api/v1/courses/{world.course.slug}/gradebook.csv")
    row = next(line for line in book.text.splitlines() if world.student.email in line)
    assert row.split(",")[3] == "9.5", row
    sim = f"/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    page = await client.get(sim)
    assert "Compute a new report" in page.text
    r = await client.post(sim, data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 303
    queued = await client.get(r.headers["location"])
    assert "queued" in queued.text and 'id="pairs"' not in queued.text
    assert 'id="report-state"' in queued.text
    report_id = int(queued.text.split("<li>Report ")[1].split(":")[0])
    # The worker's task (sent to the broker by the page), run here; the page lists the pair.
    assert compute.apply(args=[report_id]).get() == "done"
    # The address the form sent the browser to, loaded again, says the report is done: its
    # state comes from the database, never from the address.
    done = await client.get(r.headers["location"])
    assert "queued" not in done.text and 'id="report-state"' not in done.text
    pairs = done.text.split('id="pairs"')[1].split("</table>")[0]
    rows = pairs.split("<tr><td")[1:]
    assert len(rows) == 1, pairs
    assert world.student.email in rows[0] and world.other_student.email in rows[0]
    assert third.email not in pairs
    assert "3 submissions" in done.text
    side = await client.get(f"/similarity/{report_id}/pairs/1")
    assert side.status_code == 200 and "clamp_and_scale" in side.text
    await login(client, world.student)
    assert (await client.get(f"/similarity/{report_id}/pairs/1")).status_code == 403
