"""Courses made, archived and copied to a new term in the web (issue 36, item 1): who may, what
each does, and what it leaves alone. Through the app (httpx's ASGI transport, a real SQLite
database)."""

from __future__ import annotations

import html
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.service import add_lab, archive_lab, get_course, labs_of, role_in
from app.policy.rules import grant_extension, update_lab, update_lab_policies
from app.rubric.models import RubricComment, RubricItem, RubricScore
from app.rubric.service import add_comment, add_item, grade
from app.submissions.models import Submission
from tests.app.conftest import TEST_LAB, Member, World, make_member, make_world, unique
from tests.app.factories import make_submission
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


async def _post(client: httpx.AsyncClient, path: str, **fields: str) -> httpx.Response:
    token = csrf_of((await client.get("/account")).text)
    return await client.post(path, data={"csrf_token": token, **fields})


async def _as(client: httpx.AsyncClient, member: Member) -> None:
    client.cookies.clear()
    await login(client, member)


async def test_an_instructor_makes_a_course_in_the_web_and_opens_it(
    client: httpx.AsyncClient, session: Session, world: World
) -> None:
    await _as(client, world.instructor)
    home = await client.get("/")
    assert home.status_code == 200 and 'href="/courses/new"' in home.text
    assert (await client.get("/courses/new")).status_code == 200

    # Every problem at once, and what was typed kept.
    long_title = "T" * 201
    bad = await _post(client, "/courses/new", slug="GPU 27!", title=long_title)
    assert bad.status_code == 422
    page = html.unescape(bad.text)
    # The summary every form has (app.web.forms), each sentence linking to its field and
    # beside it, the field's hint still describing it.
    assert "2 problems to fix:" in page
    assert "<a href=\"#slug\">'GPU 27!' is not a course slug" in page
    assert '<a href="#title">The course title is longer than 200 characters' in page
    assert "id=\"slug-error\">'GPU 27!' is not a course slug" in page
    assert 'id="title-error">The course title is longer than 200 characters' in page
    assert 'aria-invalid="true" aria-describedby="slug-hint slug-error"' in page
    assert 'value="GPU 27!"' in page and f'value="{long_title}"' in page
    for taken, why in (
        ("new", "the address of the new-course page"),
        (world.course.slug, "already exists"),
    ):
        again = await _post(client, "/courses/new", slug=taken, title="GPU")
        assert again.status_code == 422 and why in html.unescape(again.text)

    slug = unique("gpu")
    made = await _post(client, "/courses/new", slug=slug, title="GPU Programming 2027")
    assert made.status_code == 303 and made.headers["location"].startswith(f"/courses/{slug}?")
    page = await client.get(made.headers["location"])
    assert page.status_code == 200 and "GPU Programming 2027" in page.text
    assert "you are its instructor" in html.unescape(page.text)
    assert (await client.get(f"/courses/{slug}/people")).status_code == 200
    session.expire_all()
    course = get_course(session, slug=slug)
    members = session.scalars(select(Enrollment).where(Enrollment.course_id == course.id)).all()
    assert [(m.user_id, m.role) for m in members] == [(world.instructor.user.id, "instructor")]


async def test_only_instructors_and_site_administrators_make_courses(
    client: httpx.AsyncClient, session: Session, world: World
) -> None:
    for member in (world.student, world.ta, world.outsider):
        await _as(client, member)
        assert (await client.get("/courses/new")).status_code == 403, member.role
        refused = await _post(client, "/courses/new", slug=unique("mine"), title="Mine")
        assert refused.status_code == 403 and "Only instructors and site administrators" in (
            html.unescape(refused.text)
        )
        home = (await client.get("/", follow_redirects=True)).text
        assert 'href="/courses/new"' not in home
    # A site administrator enrolled nowhere makes one and teaches it, and that alone.
    admin = make_member(session, None, Role.student)
    admin.user.is_site_admin = True
    session.commit()
    await _as(client, admin)
    slug = unique("admins")
    assert (await _post(client, "/courses/new", slug=slug, title="")).status_code == 303
    session.expire_all()
    made = get_course(session, slug=slug)
    assert made.title == slug
    assert role_in(session, user=admin.user, course=made) is Role.instructor
    assert role_in(session, user=admin.user, course=world.course) is None
    assert (await client.get(f"/courses/{world.course.slug}")).status_code == 403


async def test_an_archived_course_leaves_every_list_and_keeps_everything(
    client: httpx.AsyncClient, session: Session, world: World
) -> None:
    submission, _ = make_submission(session, user=world.student.user, lab=world.lab, score=7.0)
    session.commit()
    path = f"/courses/{world.course.slug}"
    for member in (world.student, world.ta):
        await _as(client, member)
        assert (await _post(client, f"{path}/archive")).status_code == 403
    elsewhere = make_world(session)
    await _as(client, elsewhere.instructor)
    assert (await _post(client, f"{path}/archive")).status_code == 403

    await _as(client, world.instructor)
    done = await _post(client, f"{path}/archive")
    assert done.status_code == 303
    page = html.unescape((await client.get(path)).text)
    assert "This course was archived on" in page and 'id="restore-course"' in page
    home = html.unescape((await client.get("/")).text)
    listed, archived = home.split("Archived courses")
    assert world.course.title not in listed and f'href="{path}"' in archived

    await _as(client, world.student)
    home = html.unescape((await client.get("/", follow_redirects=True)).text)
    assert f'href="{path}"' not in home and "not enrolled in any course yet" in home
    # Nothing lost: the student still reads their work by its address, but uploads no more.
    assert (await client.get(f"/submissions/{submission.id}")).status_code == 200
    lab_page = await client.get(f"{path}/labs/{world.lab.slug}")
    refused = await client.post(
        f"{path}/labs/{world.lab.slug}/submissions",
        data={"csrf_token": csrf_of(lab_page.text)},
        files={"file": ("k.cu", b"__global__ void k() {}", "text/plain")},
    )
    assert refused.status_code == 403 and "was archived on" in html.unescape(refused.text)
    session.expire_all()
    assert session.scalars(select(Submission).where(Submission.lab_id == world.lab.id)).all() == [
        session.get(Submission, submission.id)
    ]

    await _as(client, world.instructor)
    assert (await _post(client, f"{path}/restore")).status_code == 303
    await _as(client, world.student)
    assert (await client.get("/")).headers["location"] == path  # their one course again


async def test_a_course_copied_to_a_new_term_takes_its_labs_and_policies_not_its_people(
    client: httpx.AsyncClient, session: Session, world: World
) -> None:
    now = utcnow()
    course = world.course
    course.late_days, course.late_day_cap, course.regrade_window_days = 4, 2, 10
    update_lab(session, lab=world.lab, release_at=now - timedelta(days=9), due_at=now)
    update_lab_policies(session, lab=world.lab, now=now, team_size=3, late_penalty=12.5)
    item = add_item(session, lab=world.lab, title="Code quality", max_points=5, description="d")
    add_comment(session, item=item, text="Name your indices.", by=world.ta.user)
    grade(
        session,
        course=course,
        lab=world.lab,
        student=world.student.user,
        scores={item.id: (4.0, "good")},
        by=world.ta.user,
        now=now,
    )
    grant_extension(
        session,
        course=course,
        lab=world.lab,
        student=world.student.user,
        due_at=now + timedelta(days=2),
        granted_by=world.instructor.user,
    )
    make_submission(session, user=world.student.user, lab=world.lab, score=9.0)
    gone = add_lab(session, course=course, ref="vector-scale")
    archive_lab(session, lab=gone, now=now)
    session.commit()
    path = f"/courses/{course.slug}/copy"

    await _as(client, world.ta)
    assert (await client.get(path)).status_code == 403
    elsewhere = make_world(session)
    await _as(client, elsewhere.instructor)
    assert (await _post(client, path, slug=unique("theirs"), title="Theirs")).status_code == 403

    await _as(client, world.instructor)
    courses = session.scalar(select(func.count()).select_from(Course))
    form = html.unescape((await client.get(path)).text)
    assert 'value="Test course"' in form and "no dates" in form
    bad = await _post(client, path, slug=course.slug, title="Again " * 40)
    assert bad.status_code == 422
    page = html.unescape(bad.text)
    assert "2 problems to fix:" in page
    assert f'id="slug-error">A course named {course.slug} already exists' in page
    assert 'id="title-error">The course title is longer than 200 characters' in page
    assert f'value="{course.slug}"' in page and f'value="{"Again " * 40}"' in page
    assert session.scalar(select(func.count()).select_from(Course)) == courses
    slug = unique("next-term")
    done = await _post(client, path, slug=slug, title="Test course, next term")
    assert done.status_code == 303
    said = html.unescape((await client.get(done.headers["location"])).text)
    assert "1 labs with their settings and policies, 1 rubric items" in said
    assert "set each lab's opening and due date" in said

    session.expire_all()
    new = get_course(session, slug=slug)
    assert (new.late_days, new.late_day_cap, new.regrade_window_days) == (4, 2, 10)
    assert new.archived_at is None
    [lab] = labs_of(session, course=new)
    assert labs_of(session, course=new, archived=True) == []  # the removed lab stayed behind
    old = session.get_one(Lab, world.lab.id)
    same = ("slug", "title", "folder", "builtin_id", "score_policy", "late_policy", "max_score")
    assert [getattr(lab, n) for n in same] == [getattr(old, n) for n in same]
    assert (lab.team_size, lab.late_penalty, lab.digest) == (3, 12.5, old.digest)
    assert (lab.release_at, lab.due_at, lab.grades_released_at) == (None, None, None)
    assert str(TEST_LAB) == lab.folder
    [copied] = session.scalars(select(RubricItem).where(RubricItem.lab_id == lab.id)).all()
    assert (copied.title, copied.max_points, copied.description) == ("Code quality", 5, "d")
    assert session.scalars(
        select(RubricComment.text).where(RubricComment.item_id == copied.id)
    ).all() == ["Name your indices."]
    assert session.scalars(select(RubricScore).where(RubricScore.lab_id == lab.id)).all() == []
    assert session.scalars(select(Submission).where(Submission.lab_id == lab.id)).all() == []
    members = session.scalars(select(Enrollment).where(Enrollment.course_id == new.id)).all()
    assert [(m.user_id, m.role) for m in members] == [(world.instructor.user.id, "instructor")]
    # The old course is as it was.
    assert old.due_at is not None and session.get_one(Course, course.id).archived_at is None
