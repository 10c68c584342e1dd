"""Rubric points through the API and the CLI: an item's points are more than 0 and at most 1000,
a student's points are 0 to the item's maximum (both ends taken, just past them refused), one
item cleared leaves the others, every value is checked before any is written, and what the
gradebook adds up."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.service import add_lab
from app.gradebook.service import gradebook_csv
from app.rubric.models import RubricComment, RubricItem, RubricScore
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission
from tests.app.test_cli_course import fails, run
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def _base(world: World, lab: str | None = None) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{lab or world.lab.slug}/rubric"


async def _item(
    client: httpx.AsyncClient, world: World, title: str, points: float, lab: str | None = None
) -> int:
    r = await client.post(
        f"{_base(world, lab)}/items",
        headers=world.instructor.auth,
        json={"title": title, "max_points": points},
    )
    assert r.status_code == 201, r.text
    return int(next(i["id"] for i in r.json() if i["title"] == title))


async def _grade(
    client: httpx.AsyncClient, world: World, scores: list[dict], email: str | None = None
) -> httpx.Response:
    return await client.put(
        f"{_base(world)}/grades/{email or world.student.email}",
        headers=world.ta.auth,
        json={"scores": scores},
    )


def _score_of(session: Session, world: World, email: str) -> str:
    table = csv.reader(io.StringIO(gradebook_csv(session, course=world.course)))
    return next(row for row in table if row[2] == email)[3]


async def test_points_from_zero_to_the_maximum_itself_and_nothing_past_either_end(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_submission(session, user=world.student.user, lab=world.lab, score=6)
    make_submission(session, user=world.other_student.user, lab=world.lab, score=6)
    session.commit()
    item = await _item(client, world, "Report", 2.5)
    top = await _grade(client, world, [{"item": item, "points": 2.5, "comment": "Complete."}])
    assert top.status_code == 200, top.text
    assert top.json()["total"] == 2.5
    assert top.json()["scores"][0]["comment"] == "Complete."
    zero = await _grade(client, world, [{"item": item, "points": 0}], world.other_student.email)
    assert zero.status_code == 200, zero.text
    assert zero.json()["total"] == 0
    for points in (2.5001, 3, -0.5, -0.0001):
        r = await _grade(client, world, [{"item": item, "points": points}])
        assert r.status_code == 422, (points, r.text)
        assert "is outside 0 to 2.5 points" in r.json()["detail"]
    # Refusals changed nothing: the gradebook adds what was given, 6 + 2.5 and 6 + 0.
    assert _score_of(session, world, world.student.email) == "8.5"
    assert _score_of(session, world, world.other_student.email) == "6"


async def test_one_bad_value_writes_none_and_null_clears_one_item(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_submission(session, user=world.student.user, lab=world.lab, score=5)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    session.commit()
    style = await _item(client, world, "Style", 3)
    report = await _item(client, world, "Report", 4)
    foreign = await _item(client, world, "Elsewhere", 4, lab=other_lab.slug)
    r = await _grade(client, world, [{"item": style, "points": 2}, {"item": report, "points": 4}])
    assert r.status_code == 200 and r.json()["total"] == 6
    # A good value beside a bad one: neither is written.
    bad = await _grade(client, world, [{"item": style, "points": 1}, {"item": report, "points": 5}])
    assert bad.status_code == 422 and "Report: 5 is outside 0 to 4" in bad.json()["detail"]
    # Another lab's item is not this lab's.
    wrong = await _grade(
        client, world, [{"item": style, "points": 0}, {"item": foreign, "points": 1}]
    )
    assert wrong.status_code == 404 and f"no rubric item {foreign}" in wrong.json()["detail"]
    mine = await client.get(f"{_base(world)}/grades/{world.student.email}", headers=world.ta.auth)
    assert {s["title"]: s["points"] for s in mine.json()["scores"]} == {"Style": 2, "Report": 4}
    assert _score_of(session, world, world.student.email) == "11"
    # Null clears one item, and the values after it in the same request are still saved.
    cleared = await _grade(
        client, world, [{"item": report, "points": None}, {"item": style, "points": 1.5}]
    )
    assert cleared.status_code == 200
    assert {s["title"]: s["points"] for s in cleared.json()["scores"]} == {
        "Style": 1.5,
        "Report": None,
    }
    assert cleared.json()["total"] == 1.5
    assert _score_of(session, world, world.student.email) == "6.5"
    # Points are for the course's students only.
    staff = await _grade(client, world, [{"item": style, "points": 1}], world.ta.email)
    assert staff.status_code == 422 and "is not a student of" in staff.json()["detail"]


async def test_an_items_worth_is_more_than_0_and_at_most_1000(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    most = await _item(client, world, "Everything", 1000)
    least = await _item(client, world, "A little", 0.01)
    for title, points in (("Too much", 1000.5), ("Nothing", 0), ("Less", -1)):
        r = await client.post(
            f"{_base(world)}/items",
            headers=world.instructor.auth,
            json={"title": title, "max_points": points},
        )
        assert r.status_code == 422, (points, r.text)
    # The same checks where no schema stands before the service: the CLI.
    course = world.course.slug
    assert "more than 0 and at most 1000 points; 0 is not" in fails(
        "rubric", "add", course, world.lab.slug, "Nothing", "0"
    )
    assert "1000.5 is not" in fails("rubric", "add", course, world.lab.slug, "Much", "1000.5")
    assert "(1000 points)" in run("rubric", "add", course, world.lab.slug, "All of it", "1000")
    listed = run("rubric", "list", course, world.lab.slug)
    assert f"{most}: Everything (1000 points)" in listed
    assert f"{least}: A little (0.01 points)" in listed
    # Titles: one per lab, named, not too long.
    for title, words in (
        ("Everything", f"{world.lab.slug} already has a rubric item called 'Everything'."),
        ("   ", "A rubric item needs a title of 1 to 200 characters."),
        ("x" * 201, "A rubric item needs a title of 1 to 200 characters."),
    ):
        r = await client.post(
            f"{_base(world)}/items",
            headers=world.instructor.auth,
            json={"title": title, "max_points": 1},
        )
        assert r.status_code == 422 and r.json()["detail"] == words, title
    assert (await _item(client, world, "x" * 200, 1)) > 0


async def test_a_lab_holds_at_most_50_items_in_the_order_they_were_added(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    for n in range(50):
        await _item(client, world, f"Item {n:02d}", 1)
    r = await client.post(
        f"{_base(world)}/items",
        headers=world.instructor.auth,
        json={"title": "One more", "max_points": 1},
    )
    assert r.status_code == 422 and "has 50 rubric items, the most allowed" in r.json()["detail"]
    listed = await client.get(_base(world), headers=world.student.auth)
    assert [i["title"] for i in listed.json()] == [f"Item {n:02d}" for n in range(50)]
    # Students read the items, never the staff's reusable comments.
    first = listed.json()[0]["id"]
    r = await client.post(
        f"{_base(world)}/items/{first}/comments", headers=world.ta.auth, json={"text": "Tidy."}
    )
    assert r.status_code == 201
    again = await client.post(
        f"{_base(world)}/items/{first}/comments", headers=world.ta.auth, json={"text": " Tidy. "}
    )
    assert again.json()[0]["comments"] == ["Tidy."]  # the same comment is kept once
    assert (await client.get(_base(world), headers=world.ta.auth)).json()[0]["comments"] == [
        "Tidy."
    ]
    assert (await client.get(_base(world), headers=world.student.auth)).json()[0]["comments"] == []
    long = await client.post(
        f"{_base(world)}/items/{first}/comments", headers=world.ta.auth, json={"text": "y" * 501}
    )
    assert long.status_code == 422 and "1 to 500 characters" in long.json()["detail"]
    # Removing an item removes the points given on it.
    gone = await client.delete(f"{_base(world)}/items/{first}", headers=world.instructor.auth)
    assert gone.status_code == 204
    assert len((await client.get(_base(world), headers=world.ta.auth)).json()) == 49


async def test_a_student_reads_their_own_points_once_released_and_nobody_elses(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    item = await _item(client, world, "Report", 4)
    assert (await _grade(client, world, [{"item": item, "points": 3}])).status_code == 200
    url = f"{_base(world)}/grades/{world.student.email}"
    assert (await client.get(url, headers=world.student.auth)).status_code == 403
    world.lab.grades_released_at = utcnow() - timedelta(minutes=1)
    session.commit()
    mine = await client.get(url, headers=world.student.auth)
    assert mine.status_code == 200 and mine.json()["released"] is True
    assert mine.json()["total"] == 3
    for stranger in (world.other_student, world.outsider):
        assert (await client.get(url, headers=stranger.auth)).status_code == 403
    # A student never sets points, not even their own.
    r = await client.put(
        url, headers=world.student.auth, json={"scores": [{"item": item, "points": 4}]}
    )
    assert r.status_code == 403
    assert (await client.get(url, headers=world.ta.auth)).json()["total"] == 3


async def test_titles_descriptions_and_comments_are_tidied_and_bounded(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    r = await client.post(
        f"{_base(world)}/items",
        headers=world.instructor.auth,
        json={"title": "  Code \n quality ", "max_points": 2, "description": "  names  "},
    )
    assert r.status_code == 201, r.text
    (item,) = r.json()
    assert (item["title"], item["description"]) == ("Code quality", "names")
    again = await client.post(
        f"{_base(world)}/items",
        headers=world.instructor.auth,
        json={"title": "Code quality", "max_points": 1},
    )
    assert again.status_code == 422
    assert again.json()["detail"] == (
        f"{world.lab.slug} already has a rubric item called 'Code quality'."
    )
    long = await client.post(
        f"{_base(world)}/items",
        headers=world.instructor.auth,
        json={"title": "Long", "max_points": 1, "description": "d" * 4001},
    )
    assert long.status_code == 422
    assert long.json()["detail"] == "The description is longer than 4000 characters; shorten it."
    full = await client.post(
        f"{_base(world)}/items",
        headers=world.instructor.auth,
        json={"title": "Long", "max_points": 1, "description": "d" * 4000},
    )
    assert full.status_code == 201
    items = {i["title"]: i["id"] for i in full.json()}
    comments = f"{_base(world)}/items/{items['Code quality']}/comments"
    for text in ("  Clear   names. ", "x" * 500, "Explain the tiling."):
        r = await client.post(comments, headers=world.ta.auth, json={"text": text})
        assert r.status_code == 201, r.text
    for text in ("   ", "y" * 501):
        r = await client.post(comments, headers=world.ta.auth, json={"text": text})
        assert r.status_code == 422
        assert r.json()["detail"] == "A reusable comment is 1 to 500 characters."
    r = await client.post(
        f"{_base(world)}/items/{items['Long']}/comments", headers=world.ta.auth, json={"text": "L"}
    )
    by_item = {i["title"]: i["comments"] for i in r.json()}
    assert by_item == {
        "Code quality": ["Clear names.", "x" * 500, "Explain the tiling."],
        "Long": ["L"],
    }
    # A comment on a student's points: kept as written (its ends trimmed), 4000 at most.
    r = await _grade(
        client, world, [{"item": items["Long"], "points": 1, "comment": "  fine \n work  "}]
    )
    assert r.status_code == 200 and r.json()["scores"][1]["comment"] == "fine \n work"
    assert r.json()["scores"][1]["updated_at"] is not None
    r = await _grade(client, world, [{"item": items["Long"], "points": 1, "comment": "c" * 4001}])
    assert r.status_code == 422
    assert r.json()["detail"] == "Long: the comment is longer than 4000 characters."
    r = await _grade(client, world, [{"item": items["Long"], "points": 0.5, "comment": "c" * 4000}])
    assert r.status_code == 200 and r.json()["scores"][1]["points"] == 0.5


async def test_an_item_is_its_own_labs_and_removing_it_removes_its_points(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    make_submission(session, user=world.student.user, lab=world.lab, score=5)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    session.commit()
    keep = await _item(client, world, "Kept", 2)
    drop = await _item(client, world, "Dropped", 3)
    foreign = await _item(client, world, "There", 3, lab=other_lab.slug)
    for url, method in (
        (f"{_base(world)}/items/{foreign}/comments", "post"),
        (f"{_base(world)}/items/{foreign}", "delete"),
    ):
        if method == "post":
            r = await client.post(url, headers=world.instructor.auth, json={"text": "x"})
        else:
            r = await client.delete(url, headers=world.instructor.auth)
        assert r.status_code == 404, url
        assert r.json()["detail"] == f"{world.lab.slug} has no rubric item {foreign}."
    r = await _grade(client, world, [{"item": keep, "points": 2}, {"item": drop, "points": 3}])
    assert r.json()["total"] == 5
    assert _score_of(session, world, world.student.email) == "10"
    # Another student's and another lab's points are theirs.
    r = await client.put(
        f"{_base(world, other_lab.slug)}/grades/{world.student.email}",
        headers=world.ta.auth,
        json={"scores": [{"item": foreign, "points": 3}]},
    )
    assert r.status_code == 200
    other = await _grade(client, world, [{"item": keep, "points": 1}], world.other_student.email)
    assert other.json()["total"] == 1
    mine = await client.get(f"{_base(world)}/grades/{world.student.email}", headers=world.ta.auth)
    assert [(s["title"], s["points"]) for s in mine.json()["scores"]] == [
        ("Kept", 2),
        ("Dropped", 3),
    ]
    assert (
        await client.delete(f"{_base(world)}/items/{drop}", headers=world.instructor.auth)
    ).status_code == 204
    mine = await client.get(f"{_base(world)}/grades/{world.student.email}", headers=world.ta.auth)
    assert [(s["title"], s["points"]) for s in mine.json()["scores"]] == [("Kept", 2)]
    assert _score_of(session, world, world.student.email) == "7"
    # The rubric page counts, per student, the items they have points on.
    await login(client, world.ta)
    page = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}/rubric")
    assert f"{world.student.email} ✓1/1" in page.text
    assert f"{world.other_student.email} ✓1/1" in page.text


async def test_who_gave_each_point_and_comment_is_recorded(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    item = await _item(client, world, "Report", 4)
    r = await client.post(
        f"{_base(world)}/items/{item}/comments", headers=world.ta.auth, json={"text": "Tidy."}
    )
    assert r.status_code == 201
    assert (await _grade(client, world, [{"item": item, "points": 3}])).status_code == 200
    staff = await _grade(client, world, [{"item": item, "points": 1}], world.instructor.email)
    assert staff.json()["detail"] == (
        f"{world.instructor.email} is not a student of {world.course.slug}; rubric points are "
        "theirs."
    )
    session.expire_all()
    comment = session.scalars(select(RubricComment).where(RubricComment.item_id == item)).one()
    assert comment.created_by_id == world.ta.user.id
    score = session.scalars(select(RubricScore).where(RubricScore.item_id == item)).one()
    assert (score.user_id, score.graded_by_id, score.points) == (
        world.student.user.id,
        world.ta.user.id,
        3.0,
    )
    # Given again by the instructor: the same row, now theirs.
    r = await client.put(
        f"{_base(world)}/grades/{world.student.email}",
        headers=world.instructor.auth,
        json={"scores": [{"item": item, "points": 4}]},
    )
    assert r.status_code == 200
    session.expire_all()
    again = session.scalars(select(RubricScore).where(RubricScore.item_id == item)).one()
    assert (again.graded_by_id, again.points) == (world.instructor.user.id, 4.0)


def _points(value: float) -> str:
    return f"{value:g}"


async def test_one_maximum_everywhere_and_items_edited_and_removed_in_the_web_and_the_cli(
    client: httpx.AsyncClient, session: Session
) -> None:
    """Issue 36, item 6: a 5-point item makes the lab out of its points plus 5 on the
    gradebook page (and its total), the student's course page, the staff's list, its API and
    Canvas's Points Possible; editing and removing the item (web, then CLI) moves them all."""
    world = make_world(session, due_at=utcnow() - timedelta(days=1))
    world.lab.grades_released_at = utcnow() - timedelta(hours=1)
    make_submission(session, user=world.student.user, lab=world.lab, score=4)
    session.commit()
    autograde = world.lab.max_score
    course, lab = world.course.slug, world.lab.slug
    rubric_path = f"/courses/{course}/labs/{lab}/rubric"

    async def form(action: str, **fields: str) -> httpx.Response:
        page = await client.get(rubric_path)
        return await client.post(
            rubric_path, data={"csrf_token": csrf_of(page.text), "action": action, **fields}
        )

    async def maxima(expected: float) -> None:
        await login(client, world.instructor)
        book = await client.get(f"/courses/{course}/gradebook")
        head = book.text.split('<span class="muted lab-max">', 1)[1].split("</span>", 1)[0]
        assert head == f"/{_points(expected)}"
        assert f'id="total-head">Total<br><span class="muted">/{_points(expected)}</span>' in (
            book.text
        )
        students = await client.get(f"/courses/{course}/labs/{lab}/students")
        assert f"max {_points(expected)}" in students.text
        api = await client.get(f"/api/v1/courses/{course}/labs/{lab}/students", headers=ta)
        assert {row["max_score"] for row in api.json()} == {expected}
        listed = await client.get(f"/api/v1/courses/{course}/labs", headers=world.student.auth)
        assert [x["max_score"] for x in listed.json() if x["slug"] == lab] == [expected]
        canvas = await client.get(
            f"/api/v1/courses/{course}/gradebook.csv?format=canvas", headers=ta
        )
        possible = list(csv.reader(io.StringIO(canvas.text)))[1]
        assert possible[0] == "Points Possible" and possible[5] == _points(expected)
        await login(client, world.student)
        mine = await client.get(f"/courses/{course}")
        assert f'<span class="muted"> / {_points(expected)}</span>' in mine.text

    ta = world.ta.auth
    await login(client, world.instructor)
    page = await client.get(rubric_path)
    assert '<h2 id="add-item-heading">Add an item</h2>' in page.text
    r = await form("item", title="Code quality", max_points="5", description="names")
    assert r.status_code == 303
    item = session.scalars(select(RubricItem).where(RubricItem.lab_id == world.lab.id)).one()
    await _grade(client, world, [{"item": item.id, "points": 5}])
    await maxima(autograde + 5)
    # Edited in the web: below the 5 points a student has is refused in a sentence, as is a TA.
    await login(client, world.instructor)
    r = await form("edit", item=str(item.id), title="Code quality", max_points="3")
    assert r.status_code == 422
    assert "1 student has more than 3 points on Code quality; lower their points first" in r.text
    r = await form("edit", item=str(item.id), title="Readable code", max_points="8")
    assert r.status_code == 303
    page = await client.get(r.headers["location"])
    assert "Readable code is called Readable code (was Code quality); is worth 8 points" in (
        page.text
    )
    await maxima(autograde + 8)
    await login(client, world.ta)
    r = await form("remove", item=str(item.id))
    assert r.status_code == 422 and "Only instructors change or remove rubric items." in r.text
    await login(client, world.instructor)
    r = await form("remove", item=str(item.id))
    assert r.status_code == 303
    assert (
        session.scalars(select(RubricScore).where(RubricScore.lab_id == world.lab.id)).all() == []
    )
    await maxima(autograde)
    # The CLI: add, edit (points below a student's refused), remove.
    out = run("rubric", "add", course, lab, "Report", "4")
    added = int(out.split()[2])
    await _grade(client, world, [{"item": added, "points": 4}])
    assert "lower their points first" in fails(
        "rubric", "edit", course, lab, str(added), "--points", "2"
    )
    out = run("rubric", "edit", course, lab, str(added), "--points", "6", "--title", "Short report")
    assert "is called Short report (was Report); is worth 6 points (was 4)." in out
    await maxima(autograde + 6)
    out = run("rubric", "remove", course, lab, str(added))
    assert (
        out.strip()
        == f"Removed rubric item {added} of {lab} (Short report) and the points of 1 student on it."
    )
    await maxima(autograde)
    assert "has no rubric item" in fails("rubric", "remove", course, lab, str(added))


async def test_a_refused_rubric_form_keeps_what_was_typed_and_names_every_problem(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    quality = RubricItem(lab_id=world.lab.id, position=0, title="Quality", max_points=5.0)
    report = RubricItem(lab_id=world.lab.id, position=1, title="Report", max_points=3.0)
    session.add_all([quality, report])
    session.commit()
    path = f"/courses/{world.course.slug}/labs/{world.lab.slug}/rubric"
    await login(client, world.instructor)

    async def post(action: str, **fields: str) -> httpx.Response:
        page = await client.get(f"{path}?email={world.student.email}")
        data = {"csrf_token": csrf_of(page.text), "action": action, **fields}
        return await client.post(path, data=data)

    # Two points fields that are not numbers: both named beside their fields, the comments kept.
    graded = await post(
        "grade",
        email=world.student.email,
        **{
            f"points_{quality.id}": "four",
            f"comment_{quality.id}": "Clear names; one loop could go.",
            f"points_{report.id}": "3x",
            f"comment_{report.id}": "Short but right.",
        },
    )
    assert graded.status_code == 422, graded.text
    assert "2 problems to fix" in graded.text
    for item, typed in ((quality, "four"), (report, "3x")):
        assert f'<a href="#points_{item.id}">' in graded.text
        assert f'id="points_{item.id}-error"' in graded.text
        assert f'value="{typed}"' in graded.text
    assert "Clear names; one loop could go.</textarea>" in graded.text
    assert "Short but right.</textarea>" in graded.text
    mine = select(RubricScore).where(RubricScore.user_id == world.student.user.id)
    assert session.scalars(mine).all() == []  # nothing saved
    # A new item whose points are not a number: its title and description stay typed.
    added = await post("item", title="Tests", max_points="lots", description="Edge sizes")
    assert added.status_code == 422
    assert 'id="add-max_points-error"' in added.text
    assert 'id="add-title" name="title" maxlength="200" required value="Tests"' in added.text
    assert 'value="Edge sizes"' in added.text
    # An item's edit refused by the service: that item's form opens with what was typed.
    edited = await post("edit", item=str(report.id), title="Quality", max_points="2")
    assert edited.status_code == 422
    assert "already has a rubric item called &#39;Quality&#39;" in edited.text
    assert (
        f'id="edit-{report.id}-title" name="title" maxlength="200" required value="Quality"'
        in edited.text
    )
    assert edited.text.count('<details class="item-edit" open>') == 1
