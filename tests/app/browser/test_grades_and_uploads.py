"""Issue 36, items 5 to 7, in a real browser against a real server: late days told in numbers
before a late upload and what it did after (its compile error spent none), one maximum for a lab
with a rubric item on the gradebook, the rubric page's edit and remove, and a 20 MB upload
answered with the lab page. Screenshots: 36-*; axe-core at 1280 and 390 pixels."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.core.database import utcnow
from app.courses.service import get_course, get_lab
from app.policy.rules import update_lab
from app.rubric.service import add_item, grade
from app.users.models import User
from tests.app.browser.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BROKEN = 'extern "C" __global__ void scale(float* x, float a, unsigned int n) { x[i] *= a }\n'
WIDTHS = ((1280, 900), (390, 844))


@pytest.fixture(scope="module")
def course(server: Server) -> dict[str, float]:
    """3 late days (2 on one lab), vector-scale due 30 hours ago; matmul-tiled with a released
    5-point rubric item on which Ada has 4."""
    with server.session() as session:
        demo = get_course(session, slug="demo")
        demo.late_days, demo.late_day_cap = 3, 2
        scale = get_lab(session, course=demo, slug="vector-scale")
        update_lab(session, lab=scale, due_at=utcnow() - timedelta(hours=30))
        matmul = get_lab(session, course=demo, slug="matmul-tiled")
        item = add_item(session, lab=matmul, title="Code quality", max_points=5)
        ada = session.scalars(select(User).where(User.email == server.people.student)).one()
        grade(
            session,
            course=demo,
            lab=matmul,
            student=ada,
            scores={item.id: (4.0, "Clear names.")},
            by=None,
            now=utcnow(),
        )
        matmul.grades_released_at = utcnow() - timedelta(minutes=1)
        session.commit()
        return {"matmul": matmul.max_score}


def _clean(v: Any, what: str) -> None:
    assert v.axe() == [], what
    assert v.sideways_overflow() == 0, (what, v.overflowing())


def test_a_late_upload_says_its_late_days_before_and_after_and_a_compile_error_spends_none(
    visitor: Any, server: Server, course: dict, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.cu"
    broken.write_text(BROKEN, encoding="utf-8")
    for width, height in WIDTHS:
        v = visitor(width=width, height=height)
        v.login(server.people.unnamed)
        v.go("/courses/demo/labs/vector-scale")
        note = " ".join(v.page.inner_text("#late-note").split())
        assert note.startswith("Submitting now is 2 days late, so it is marked late."), note
        assert (
            "It holds 2 of your late days as soon as it is accepted: 1 of your 3 left remains"
            in note
        )
        assert "a compile error scores 0 and spends no late days" in note
        _clean(v, f"lab page, late, {width}")
        v.shot(f"36-5-lab-late-note-{width}")
    v.page.set_input_files("input[type=file]", str(broken))
    v.page.click("form.inline button[type=submit]")
    v.page.wait_for_url("**/submissions/*")
    v.page.wait_for_selector('[data-status="compile_error"]', timeout=60_000)
    v.page.reload()
    told = " ".join(v.page.inner_text("#late-day-note").split())
    assert told.startswith("It did not compile: a compile error scores 0 and spends no late days")
    assert "(3 left)" in told
    events = v.page.inner_text("#late-day-events")
    assert "held 2 for a late upload" in events and "got 2 back from vector-scale" in events
    submission = v.page.url.removeprefix(server.base)
    for width, height in WIDTHS:
        w = visitor(width=width, height=height)
        w.login(server.people.unnamed)
        w.go(submission)
        _clean(w, f"submission page, {width}")
        w.shot(f"36-5-submission-compile-error-{width}")
    v.go("/courses/demo/late-days")
    assert v.page.inner_text("#left") == "3"


def test_one_maximum_on_the_gradebook_and_rubric_items_edited_and_removed(
    visitor: Any, server: Server, course: dict
) -> None:
    most = course["matmul"] + 5
    for width, height in WIDTHS:
        student = visitor(width=width, height=height)
        student.login(server.people.student)
        student.go("/courses/demo")
        cell = student.page.inner_text("tr:has(#lab-matmul-tiled)")
        assert f"/ {most:g}" in cell
        student.shot(f"36-6-course-student-{width}")
        teacher = visitor(width=width, height=height)
        teacher.login(server.people.instructor)
        teacher.go("/courses/demo/gradebook")
        heads = teacher.page.locator("th.lab .lab-max").all_inner_texts()
        assert f"/{most:g}" in heads
        _clean(teacher, f"gradebook, {width}")
        teacher.shot(f"36-6-gradebook-{width}")
        teacher.go("/courses/demo/labs/matmul-tiled/rubric")
        assert teacher.page.inner_text("#add-item-heading") == "Add an item"
        assert f"out of {most:g} everywhere" in teacher.page.inner_text("#maximum")
        teacher.page.locator("details.item-edit summary").first.click()
        _clean(teacher, f"rubric page, {width}")
        teacher.shot(f"36-6-rubric-{width}")
    form = teacher.page.locator("form.edit-item").first
    form.locator("input[name=max_points]").fill("8")
    form.locator("button[type=submit]").click()
    teacher.page.wait_for_selector("#message")
    assert "is worth 8 points (was 5)" in teacher.page.inner_text("#message")
    teacher.go("/courses/demo/gradebook")
    assert f"/{course['matmul'] + 8:g}" in teacher.page.locator("th.lab .lab-max").all_inner_texts()
    teacher.go("/courses/demo/labs/matmul-tiled/rubric")
    teacher.page.locator("details.item-edit summary").first.click()
    teacher.page.locator("form.remove-item button").first.click()
    teacher.page.wait_for_selector("#message")
    assert "Removed Code quality and every student's points on it." in teacher.page.inner_text(
        "#message"
    )
    teacher.go("/courses/demo/gradebook")
    assert f"/{course['matmul']:g}" in teacher.page.locator("th.lab .lab-max").all_inner_texts()


def test_a_20_megabyte_upload_is_told_on_the_lab_page(
    visitor: Any, server: Server, course: dict, tmp_path: Path
) -> None:
    big = tmp_path / "big.cu"
    big.write_bytes(b"// x\n" * (4 * 1024 * 1024))  # 20 MiB
    for width, height in WIDTHS:
        v = visitor(width=width, height=height)
        v.login(server.people.student)
        v.go("/courses/demo/labs/vector-scale")
        v.page.set_input_files("input[type=file]", str(big))
        v.page.click("form.inline button[type=submit]")
        v.page.wait_for_selector("#error")
        error = v.page.inner_text("#error")
        assert error.startswith("The upload is 20971") and "(20.0 MiB), over the limit of" in error
        assert "262144 bytes (256 KiB) for one .cu file" in error
        # The lab's page, signed in: its breadcrumb, the form to try again, the account menu.
        assert "Scale a vector" in v.page.inner_text("nav.crumbs")
        assert v.page.locator("input[type=file]").count() == 1
        assert server.people.student in v.page.inner_text("header")
        _clean(v, f"refused upload, {width}")
        v.shot(f"36-7-upload-too-large-{width}")
