"""Issue 36, item 9, in a real browser: breadcrumbs by titles on every page that has them, the
lab page's title and text before its upload form, asking for a regrade below the result it is
about, and at 390 px the people table's addresses whole and wide tables that say they scroll."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.courses.models import Course, Lab
from tests.app.browser.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Every page with breadcrumbs that a seeded server shows, by who sees it.
CRUMBED = [
    ("student", "/courses/demo/labs/matmul-tiled"),
    ("student", "/submissions/{ada_matmul}"),
    ("student", "/courses/demo/labs/matrix-transpose/history"),
    ("student", "/submissions/compare?a={ada_transpose_naive}&b={ada_transpose_padded}"),
    ("student", "/courses/demo/labs/matmul-tiled/leaderboard"),
    ("student", "/courses/demo/late-days"),
    ("ta", "/courses/demo/labs/matrix-transpose/profiles"),
    ("ta", "/courses/demo/labs/matmul-tiled/students"),
    ("ta", "/courses/demo/labs/matmul-tiled/submissions"),
    ("ta", "/courses/demo/labs/matmul-tiled/regrade-requests"),
    ("ta", "/courses/demo/labs/matmul-tiled/rubric"),
    ("ta", "/courses/demo/labs/matmul-tiled/similarity"),
    ("ta", "/courses/demo/labs/matmul-tiled/teams"),
    ("ta", "/courses/demo/gradebook"),
    ("ta", "/courses/demo/extensions"),
    ("ta", "/courses/demo/people"),
    ("instructor", "/courses/demo/labs/matmul-tiled/settings"),
    ("instructor", "/courses/demo/lti"),
]

CRUMBS = """() => [...document.querySelectorAll("nav.crumbs a, nav.crumbs span")]
    .map(e => ({href: e.getAttribute("href") || "", text: e.textContent.trim()}))"""


def _people(server: Server) -> dict[str, str]:
    return {
        "student": server.people.student,
        "ta": server.people.ta,
        "instructor": server.people.instructor,
    }


def test_breadcrumbs_name_courses_and_labs_by_their_titles(visitor: Any, server: Server) -> None:
    with server.session() as session:
        course = session.scalars(select(Course).where(Course.slug == "demo")).one()
        titles = {f"/courses/{course.slug}": course.title}
        for lab in session.scalars(select(Lab).where(Lab.course_id == course.id)):
            titles[f"/courses/{course.slug}/labs/{lab.slug}"] = lab.title
        slugs = {course.slug} | {p.rsplit("/", 1)[1] for p in titles}
    browsers: dict[str, Any] = {}
    wrong: list[tuple[str, str, str]] = []
    for who, path in CRUMBED:
        if who not in browsers:
            browsers[who] = visitor()
            browsers[who].login(_people(server)[who])
        v = browsers[who]
        v.go(path.format(**server.ids))
        assert v.page.locator('nav[aria-label="Breadcrumb"]').count() == 1, path
        for crumb in v.page.evaluate(CRUMBS):
            if crumb["href"] in titles and crumb["text"] != titles[crumb["href"]]:
                wrong.append((path, crumb["text"], titles[crumb["href"]]))
            elif crumb["text"] in slugs:
                wrong.append((path, crumb["text"], "a slug"))
    assert wrong == [], f"breadcrumbs not by title (page, shown, expected): {wrong}"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_lab_page_opens_with_the_labs_title_and_text(
    visitor: Any, server: Server, width: int
) -> None:
    v = visitor(width=width, height=900)
    v.login(server.people.student)
    v.go("/courses/demo/labs/matmul-tiled")
    assert v.page.inner_text("h1") == "Tiled matrix multiplication with shared memory"
    order = v.page.evaluate(
        """() => { const upload = document.querySelector("#upload-file");
            return [document.querySelector("h1"), document.querySelector(".lab-text p"),
                    upload.closest(".card"), upload]
                .map(e => e.getBoundingClientRect().top + window.scrollY) }"""
    )
    assert order == sorted(order), order  # title, then the text, then the upload card
    v.shot(f"36-lab-title-first-{width}", full_page=False)
    # A link past the text to the form, for a student coming back to upload.
    v.page.click("#jump a[href='#submit']")
    assert v.page.evaluate("location.hash") == "#submit"


def test_a_refused_upload_shows_the_form_and_why_before_the_labs_text(
    visitor: Any, server: Server, tmp_path: Path
) -> None:
    v = visitor()
    v.login(server.people.student)
    v.go("/courses/demo/labs/matmul-tiled")
    bad = tmp_path / "tiled.cu"
    bad.write_bytes(b"\xff\xfe not UTF-8 \x80")
    v.page.set_input_files("#upload-file", str(bad))
    with v.page.expect_navigation():
        v.page.click("#submit button[type=submit]")
    error = v.page.locator("#error")
    assert "UTF-8" in error.inner_text()
    assert error.bounding_box()["y"] < v.page.locator(".lab-text h1").bounding_box()["y"]


def test_asking_for_a_regrade_comes_below_the_result_it_is_about(
    visitor: Any, server: Server
) -> None:
    v = visitor()
    v.login(server.people.student)
    v.go(f"/submissions/{server.ids['ada_matmul']}")
    cases = v.page.locator(".card", has=v.page.locator("h2", has_text="Test cases"))
    ask = v.page.locator("#regrade-requests")
    assert ask.locator("#ask-regrade").count() == 1
    assert cases.bounding_box()["y"] < ask.bounding_box()["y"]
    v.page.locator("#regrade-requests").scroll_into_view_if_needed()
    v.shot("36-regrade-ask-below-cases-1280", full_page=False)


def test_at_390_pixels_the_people_table_shows_every_address_whole(
    visitor: Any, server: Server
) -> None:
    v = visitor(width=390, height=844)
    v.login(server.people.instructor)
    v.go("/courses/demo/people")
    assert v.sideways_overflow() == 0
    clipped = v.page.evaluate(
        """() => { const box = document.querySelector("#people").closest(".scroll");
            const edge = box.getBoundingClientRect().right;
            return [...document.querySelectorAll("#people .address")]
                .filter(a => a.getBoundingClientRect().right > edge + 0.5)
                .map(a => a.textContent) }"""
    )
    assert clipped == [], clipped
    box = v.page.locator("#people").locator("xpath=..")
    assert box.evaluate("b => b.scrollWidth - b.clientWidth") <= 0
    assert box.get_attribute("role") is None  # it fits: not a scrolling region
    v.shot("36-people-390", full_page=False)


def test_a_wide_table_is_a_named_focusable_region_that_says_it_scrolls(
    visitor: Any, server: Server
) -> None:
    phone = visitor(width=390, height=844)
    phone.login(server.people.ta)
    phone.go("/courses/demo/gradebook")
    box = phone.page.locator(".scroll", has=phone.page.locator("table.book"))
    assert box.evaluate("b => b.scrollWidth > b.clientWidth")
    assert box.get_attribute("role") == "region"
    assert re.fullmatch(r".+ \(scrolls sideways\)", box.get_attribute("aria-label") or "")
    assert box.get_attribute("tabindex") == "0"
    hint = phone.page.locator(".scroll-hint").first
    assert hint.is_visible() and "scroll" in hint.inner_text()
    # The edge shadows are drawn without any script.
    assert "gradient" in box.evaluate("b => getComputedStyle(b).backgroundImage")
    # From the keyboard: focus the region, and the arrow keys move the table.
    box.focus()
    phone.page.keyboard.press("ArrowRight")
    phone.page.keyboard.press("ArrowRight")
    phone.page.wait_for_function(
        "() => document.querySelector('table.book').closest('.scroll').scrollLeft > 0"
    )
    phone.shot("36-gradebook-scroll-hint-390", full_page=False)
    # At 1280 px the table fits: no region, no hint, out of the Tab order.
    desk = visitor(width=1280, height=900)
    desk.login(server.people.ta)
    desk.go("/courses/demo/people")
    fits = desk.page.locator(".scroll", has=desk.page.locator("#people"))
    assert fits.get_attribute("role") is None and fits.get_attribute("tabindex") is None
    assert desk.page.locator(".scroll-hint:visible").count() == 0
