"""Similarity "past" submissions are the same course's earlier offerings only (issue 31, class 7).

On main a TA of one course asked for a report "against earlier terms" and read, side by side,
the sources and emails of every course with a lab of the same name, courses running now
included. Now a report compares only with courses linked as this course's earlier offerings
(by someone who teaches both), once they are over; the staff of either course see the link and
may remove it; and a report's pages never show another course's source or emails unless such
a link stands, reports made before included."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Course, Lab, Role
from app.courses.service import add_lab, create_course
from app.similarity.models import SimilarityPair, SimilarityReport
from app.similarity.tasks import compute
from app.submissions.models import Submission
from tests.app.conftest import Member, make_member, unique
from tests.app.factories import make_submission
from tests.app.similarity.test_similarity import SHARED
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def _course(session: Session, *, name: str, due_days_ago: float) -> tuple[Course, Lab]:
    course = create_course(session, slug=unique(name), title=name)
    lab = add_lab(
        session, course=course, ref="vector-scale", due_at=utcnow() - timedelta(days=due_days_ago)
    )
    return course, lab


def _hand_in(session: Session, lab: Lab, member: Member, source: str = SHARED) -> Submission:
    sub, _ = make_submission(session, user=member.user, lab=lab, score=10)
    sub.source_text = source
    return sub


async def _report(client: httpx.AsyncClient, base: str, who: Member) -> dict:
    r = await client.post(base, headers=who.auth, json={"include_past": True})
    assert r.status_code == 202, r.text
    assert compute.apply(args=[r.json()["id"]]).get() == "done"
    report = await client.get(f"/api/v1/similarity/{r.json()['id']}", headers=who.auth)
    assert report.status_code == 200, report.text
    return report.json()


async def test_only_linked_earlier_offerings_count_as_past(
    client: httpx.AsyncClient, session: Session
) -> None:
    mine, lab = _course(session, name="gpu-2031", due_days_ago=-7)  # running now
    running, running_lab = _course(session, name="other-2031", due_days_ago=-3)  # a stranger's
    earlier, earlier_lab = _course(session, name="gpu-2030", due_days_ago=300)  # over
    ta = make_member(session, mine, Role.ta)
    teacher = make_member(session, mine, Role.instructor)  # teaches this course...
    from app.courses.service import enroll

    enroll(session, user=teacher.user, course=earlier, role=Role.instructor)  # ...and last year's
    enroll(session, user=teacher.user, course=running, role=Role.instructor)  # and a running one
    other_ta = make_member(session, earlier, Role.ta)
    student = make_member(session, mine, Role.student)
    stranger = make_member(session, running, Role.student)
    old_student = make_member(session, earlier, Role.student)
    _hand_in(session, lab, student)
    _hand_in(session, running_lab, stranger)
    _hand_in(session, earlier_lab, old_student)
    session.commit()
    base = f"/api/v1/courses/{mine.slug}/labs/{lab.slug}/similarity"

    # Nothing linked: "past" is empty. A course running now, with the same lab, is no one's past.
    report = await _report(client, base, ta)
    assert report["stats"]["past_submissions"] == 0 and report["pairs"] == []

    links = f"/api/v1/courses/{mine.slug}/earlier-offerings"
    # Only an instructor of both courses links them; not a TA, not a stranger to the other.
    r = await client.put(f"{links}/{earlier.slug}", headers=ta.auth)
    assert r.status_code == 403 and "instructor" in r.json()["detail"]
    outsider = make_member(session, mine, Role.instructor)
    session.commit()
    r = await client.put(f"{links}/{earlier.slug}", headers=outsider.auth)
    assert r.status_code == 403 and "You do not teach a course named" in r.json()["detail"]
    # A course still running is not an earlier offering, even to someone who teaches both.
    r = await client.put(f"{links}/{running.slug}", headers=teacher.auth)
    assert r.status_code == 422 and "is still running" in r.json()["detail"]
    r = await client.put(f"{links}/{earlier.slug}", headers=teacher.auth)
    assert r.status_code == 200, r.text
    assert (r.json()["course"], r.json()["earlier"]) == (mine.slug, earlier.slug)

    report = await _report(client, base, ta)
    assert report["stats"]["past_submissions"] == 1
    (pair,) = report["pairs"]
    assert (pair["a"], pair["b"]) == (student.email, f"{earlier.slug}: {old_student.email}")
    detail = (await client.get(pair["url"], headers=ta.auth)).json()
    assert "clamp_and_scale" in "".join(p["text"] for p in detail["b_passages"])
    assert stranger.email not in str(report)

    # The earlier course's staff see the link, and remove it: the report no longer shows
    # that course's student or source, though it was made while the link stood.
    seen = await client.get(
        f"/api/v1/courses/{earlier.slug}/earlier-offerings", headers=other_ta.auth
    )
    assert [(x["course"], x["earlier"]) for x in seen.json()] == [(mine.slug, earlier.slug)]
    r = await client.delete(
        f"/api/v1/courses/{earlier.slug}/earlier-offerings/{mine.slug}", headers=other_ta.auth
    )
    assert r.status_code == 204
    again = await client.get(f"/api/v1/similarity/{report['id']}", headers=ta.auth)
    (withheld,) = again.json()["pairs"]
    assert withheld["withheld"] and old_student.email not in again.text
    assert earlier.slug not in withheld["b"]
    detail = (await client.get(withheld["url"], headers=ta.auth)).json()
    assert detail["b_passages"] == [] and "clamp_and_scale" not in str(detail["b_passages"])
    await login(client, ta)
    for page in (
        f"/courses/{mine.slug}/labs/{lab.slug}/similarity",
        f"/similarity/{report['id']}/pairs/{withheld['rank']}",
    ):
        html = (await client.get(page)).text
        assert old_student.email not in html and "not linked" in html
        assert "clamp_and_scale(src[i]" not in html.split('id="side-b"')[-1]


async def test_a_report_made_before_shows_no_unlinked_course(
    client: httpx.AsyncClient, session: Session
) -> None:
    """A report main made against "every course with this lab" keeps working, but its pairs with
    a course that is not linked show neither the other side's email nor its source."""
    mine, lab = _course(session, name="gpu-2032", due_days_ago=-7)
    running, running_lab = _course(session, name="other-2032", due_days_ago=-7)
    ta = make_member(session, mine, Role.ta)
    student = make_member(session, mine, Role.student)
    stranger = make_member(session, running, Role.student)
    a = _hand_in(session, lab, student)
    b = _hand_in(session, running_lab, stranger, SHARED.replace("value", "secret_value"))
    session.flush()
    report = SimilarityReport(lab_id=lab.id, include_past=True, state="done", stats={})
    session.add(report)
    session.flush()
    session.add(
        SimilarityPair(
            report_id=report.id,
            rank=1,
            a_submission_id=a.id,
            b_submission_id=b.id,
            a_label=student.email,
            b_label=f"{running.slug}: {stranger.email}",
            a_similarity=0.9,
            b_similarity=0.9,
            overlap_tokens=40,
            a_slices=[[0, 40]],
            b_slices=[[0, 40]],
        )
    )
    session.commit()
    r = await client.get(f"/api/v1/similarity/{report.id}", headers=ta.auth)
    assert r.status_code == 200
    assert stranger.email not in r.text and running.slug not in r.text
    (pair,) = r.json()["pairs"]
    assert pair["a"] == student.email and pair["withheld"]
    detail = (await client.get(pair["url"], headers=ta.auth)).json()
    assert detail["b_passages"] == [] and "clamp_and_scale" in str(detail["a_passages"])
    await login(client, ta)
    page = (await client.get(f"/similarity/{report.id}/pairs/1")).text
    assert "secret_value" not in page and stranger.email not in page


async def test_the_similarity_page_links_and_unlinks_an_earlier_offering(
    client: httpx.AsyncClient, session: Session
) -> None:
    mine, lab = _course(session, name="gpu-2033", due_days_ago=-7)
    earlier, _ = _course(session, name="gpu-2032", due_days_ago=300)
    teacher = make_member(session, mine, Role.instructor)
    from app.courses.service import enroll

    enroll(session, user=teacher.user, course=earlier, role=Role.instructor)
    ta = make_member(session, earlier, Role.ta)  # staff of the earlier course only
    session.commit()
    page_url = f"/courses/{mine.slug}/labs/{lab.slug}/similarity"
    await login(client, teacher)
    page = await client.get(page_url)
    assert 'id="earlier-offerings"' in page.text and "No course is linked." in page.text
    form = {"csrf_token": csrf_of(page.text), "action": "link", "back": lab.slug}
    r = await client.post(
        f"/courses/{mine.slug}/earlier-offerings", data={**form, "other": earlier.slug}
    )
    assert r.status_code == 303, r.text
    page = await client.get(r.headers["location"])
    assert "is linked as an earlier offering" in page.text
    assert f"<strong>{earlier.slug}</strong>" in page.text
    # The earlier course's TA removes it from their own course's side (the API: the page is
    # the lab's of the course they are staff of).
    r = await client.delete(
        f"/api/v1/courses/{earlier.slug}/earlier-offerings/{mine.slug}", headers=ta.auth
    )
    assert r.status_code == 204
    page = await client.get(page_url)
    assert "No course is linked." in page.text
    # A form that names something else changes nothing.
    r = await client.post(
        f"/courses/{mine.slug}/earlier-offerings",
        data={**form, "action": "rename", "other": earlier.slug},
    )
    assert r.status_code == 422
