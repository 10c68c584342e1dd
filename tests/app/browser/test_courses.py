"""Issue 36, items 1 and 4, in a real browser at 1280 and 390 px: an instructor makes a course,
copies one to a new term and archives it, from the pages alone; the LMS and sign-in section is
reached from the course's staff menu and the site administrator's, warns that the server's
address (plain http on loopback here) will not work in an LMS, and registers, changes and
removes an LMS, its form shown again with every field as typed and every problem named.
axe-core checks each page, the forms with their problems too."""

from __future__ import annotations

from typing import Any

import pytest

from tests.app.browser.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _clean(v: Any, where: str) -> None:
    assert v.axe() == [], where
    assert v.sideways_overflow() == 0, (where, v.overflowing())


@pytest.mark.parametrize("width", [1280, 390])
def test_an_instructor_makes_copies_and_archives_a_course(
    visitor: Any, server: Server, width: int
) -> None:
    v = visitor(width=width, height=900)
    v.page.on("dialog", lambda dialog: dialog.accept())
    v.login(server.people.instructor)
    v.go("/")
    v.page.click("#new-course")
    v.page.wait_for_url("**/courses/new")
    _clean(v, "new course")
    long_title = ("GPU Programming " * 13).strip()  # 207 characters
    v.page.fill("#slug", "GPU 27!")
    v.page.fill("#title", long_title)
    v.page.click("#course-form button[type=submit]")
    v.page.wait_for_selector("#error")
    errors = v.page.inner_text("#error")
    assert "2 problems to fix:" in errors  # the summary every form has (app.web.forms)
    assert "'GPU 27!' is not a course slug" in errors
    assert "The course title is longer than 200 characters" in errors
    assert v.page.input_value("#slug") == "GPU 27!"
    assert v.page.input_value("#title") == long_title
    assert v.page.get_attribute("#slug", "aria-invalid") == "true"
    assert "'GPU 27!' is not a course slug" in v.page.inner_text("#slug-error")
    _clean(v, "new course with its problems")
    v.shot(f"36-course-new-errors-{width}")

    slug = f"gpu27-{width}"
    v.page.fill("#slug", slug)
    v.page.fill("#title", "GPU Programming 2027")
    v.page.click("#course-form button[type=submit]")
    v.page.wait_for_url(f"**/courses/{slug}?**")
    assert "you are its instructor" in v.page.inner_text("#message")
    assert v.page.locator("#staff-menu a", has_text="People").count() == 1

    # Next term's course from this term's: the labs and settings, no people, no dates.
    v.go("/courses/demo")
    v.page.click("#copy-link")
    v.page.wait_for_url("**/courses/demo/copy")
    _clean(v, "copy")
    assert v.page.input_value("#title") == "Demo course"
    v.page.fill("#slug", "demo")
    v.page.fill("#title", long_title)
    v.page.click("#course-form button[type=submit]")
    v.page.wait_for_selector("#error")
    assert "2 problems to fix:" in v.page.inner_text("#error")
    assert "A course named demo already exists" in v.page.inner_text("#slug-error")
    assert "longer than 200 characters" in v.page.inner_text("#title-error")
    assert (v.page.input_value("#slug"), v.page.input_value("#title")) == ("demo", long_title)
    v.page.click("#error a[href='#title']")  # the summary's link takes the keyboard there
    assert v.page.evaluate("document.activeElement.id") == "title"
    _clean(v, "copy with its problems")
    v.shot(f"36-course-copy-errors-{width}")
    v.page.fill("#slug", f"demo-next-{width}")
    title = f"Demo course, next term ({width} px)"
    v.page.fill("#title", title)
    v.page.click("#course-form button[type=submit]")
    v.page.wait_for_url(f"**/courses/demo-next-{width}?**")
    said = v.page.inner_text("#message")
    assert f"Copied Demo course to {title}: 16 labs" in said
    assert v.page.locator("#labs tr").count() == 17  # the header and the 16 labs
    assert "2026" not in v.page.inner_text("#labs")  # no dates carried over
    v.shot(f"36-course-copied-{width}")

    # Archived: off the list, kept, and restorable.
    v.page.click("#archive-course")
    v.page.wait_for_selector("#archived")
    assert "takes no uploads; everything in it is kept" in v.page.inner_text("#archived")
    _clean(v, "archived course")
    v.go("/")
    assert title not in v.page.inner_text("#courses")
    assert title in v.page.inner_text("#archived-courses")
    _clean(v, "home with archived courses")
    v.shot(f"36-home-{width}")
    v.page.click(f"#archived-courses a[href='/courses/demo-next-{width}']")
    v.page.click("#restore-course")
    v.page.wait_for_selector("#message")
    v.go("/")
    assert title in v.page.inner_text("#courses")
    assert v.outside == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_lms_and_sign_in_section_registers_changes_and_removes_an_lms(
    visitor: Any, server: Server, width: int
) -> None:
    v = visitor(width=width, height=900)
    v.page.on("dialog", lambda dialog: dialog.accept())
    v.login(server.people.instructor)  # the demo's instructor, the site administrator too
    v.go("/courses/demo")
    v.page.click("#lms-link")
    v.page.wait_for_url("**/courses/demo/lti")
    warning = v.page.inner_text("#address-problem")
    assert f"public address is {server.base} (KERNELGRADER_PUBLIC_URL)" in warning
    assert "needs https" in warning and "127.0.0.1 is this machine itself" in warning
    _clean(v, "course LMS page")
    v.shot(f"36-course-lti-{width}")

    v.page.click("#site-admin")
    v.page.wait_for_url("**/admin/lti")
    assert "will not work in an LMS" in v.page.inner_text("#address-problem")
    v.page.click("#site-admin-menu >> text=Sign-in providers and refused sign-ins")
    v.page.wait_for_url("**/admin/sign-in")
    assert "127.0.0.1 is this machine itself" in v.page.inner_text("#address-problem")
    _clean(v, "sign-in page")
    v.page.click("#site-admin-menu >> text=LMS registrations")
    v.page.wait_for_url("**/admin/lti")

    slug = f"moodle-{width}"
    site = f"https://moodle{width}.uni.example"
    typed = {
        "slug": slug,
        "name": "University Moodle",
        "issuer": site,
        "client_id": "",
        "deployment_ids": "3",
        "auth_login_url": f"{site}/mod/lti/auth.php",
        "auth_token_url": f"{site}/mod/lti/token.php",
        "key_set_url": f"moodle{width}.uni.example/mod/lti/certs.php",
        "auth_audience": "",
    }
    for name, value in typed.items():
        v.page.fill(f"#new-{name}", value)
    v.page.click("#register button[type=submit]")
    v.page.wait_for_selector("#error")
    errors = v.page.inner_text("#error")
    assert "2 problems to fix:" in errors
    assert "The client id is missing" in errors and "key set URL" in errors
    for name, value in typed.items():
        assert v.page.input_value(f"#new-{name}") == value, name
    assert "The client id is missing" in v.page.inner_text("#new-client_id-error")
    _clean(v, "registration form with its problems")
    v.shot(f"36-admin-lti-errors-{width}")

    v.page.fill("#new-client_id", "kg-client")
    v.page.fill("#new-key_set_url", f"{site}/mod/lti/certs.php")
    v.page.click("#register button[type=submit]")
    v.page.wait_for_selector("#message")
    assert "Registered University Moodle" in v.page.inner_text("#message")

    card = f"#registration-{slug}"
    v.page.click(f"{card} summary")
    v.page.fill(f"#change-{slug}-deployment_ids", " , ")
    v.page.fill(f"#change-{slug}-name", "Moodle (main campus)")
    v.page.fill(f"#change-{slug}-auth_token_url", "ftp://x")
    v.page.click(f"{card} form[action='/admin/lti/{slug}'] button[type=submit]")
    v.page.wait_for_selector("#error")
    assert "2 problems to fix:" in v.page.inner_text("#error")
    assert v.page.is_visible(f"#change-{slug}-auth_token_url-error")  # its "Change" opened
    assert v.page.is_visible(f"#change-{slug}-deployment_ids-error")
    assert v.page.input_value(f"#change-{slug}-name") == "Moodle (main campus)"
    assert v.page.input_value(f"#change-{slug}-auth_token_url") == "ftp://x"
    assert "University Moodle" in v.page.inner_text(f"{card} h2")  # nothing saved
    _clean(v, "a registration's Change form with its problems")
    v.shot(f"36-admin-lti-change-errors-{width}")
    v.page.fill(f"#change-{slug}-deployment_ids", "3, 4")
    v.page.fill(f"#change-{slug}-auth_token_url", f"{site}/mod/lti/token.php")
    v.page.click(f"{card} form[action='/admin/lti/{slug}'] button[type=submit]")
    v.page.wait_for_selector("#message")
    assert f"Changed {slug}." in v.page.inner_text("#message")
    assert "3, 4" in v.page.inner_text(card) and "Moodle (main campus)" in v.page.inner_text(card)
    _clean(v, "LMS registrations")
    v.shot(f"36-admin-lti-{width}")

    v.page.click(f"#remove-{slug}")
    v.page.wait_for_selector("#message")
    assert f"Removed {slug}" in v.page.inner_text("#message")
    assert v.page.locator(card).count() == 0
    assert v.outside == []
