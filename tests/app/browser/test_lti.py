"""LTI in a real browser: a site administrator registers an LMS on /admin/lti, the LMS
course's instructor links it to their course from a launch, and a student's launch from that
LMS (a platform built on lti1p3platform, on loopback) lands on a lab. The screenshots are the
registration page, the linking page and the landing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.users.models import User
from tests.app.browser.conftest import Server
from tests.app.lti.platform import INSTRUCTOR, TestPlatform

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_an_lms_is_registered_linked_and_a_launch_lands_on_a_lab(
    visitor: Any, server: Server
) -> None:
    from app.lti.tool import forget_tokens

    forget_tokens()
    with server.session() as session:
        admin = session.scalar(select(User).where(User.email == server.people.instructor))
        assert admin is not None
        admin.is_site_admin = True
        session.commit()
    with TestPlatform(tool_base=server.base) as lms:
        teacher = visitor(width=1280, height=900)
        teacher.login(server.people.instructor)
        teacher.go("/admin/lti")
        assert server.base + "/lti/launch" in teacher.page.inner_text("#register")
        teacher.page.fill("#register [name=slug]", lms.slug)
        for name, value in lms.values().items():
            teacher.page.fill(f"#register [name={name}]", value)
        teacher.page.click("#register button[type=submit]")
        teacher.page.wait_for_selector("#message")
        assert "Registered Test LMS" in teacher.page.inner_text("#message")
        assert lms.tool_key_set_url in teacher.page.inner_text(f"#registration-{lms.slug}")
        teacher.shot("lti-registration-desktop")

        # The LMS course's instructor (the same person) links it from a launch.
        grace = lms.person("Grace Hopper", server.people.instructor, role=INSTRUCTOR)
        ada = lms.person("Ada Lovelace", "ada.browser@uni.example")
        course = lms.course("GPU Programming (Canvas)", grace, ada)
        teacher.page.goto(lms.login_initiation(grace, deep_link_in=course))
        teacher.page.wait_for_url("**/lti/continue/**")
        assert "Link this LMS course" in teacher.page.inner_text("main")
        teacher.page.select_option("#course", "demo")
        teacher.shot("lti-link-course-desktop")
        teacher.page.click("#connect button[type=submit]")
        teacher.page.wait_for_url("**/lti/deep-link/**")

        link = lms.link(course, "Vector scale", {"lab": "vector-scale"})
        student = visitor(width=1280, height=900)
        # The LMS sends the browser to the tool's login; the rest is redirects and the LMS's
        # auto-posting form, as in a real launch.
        student.page.goto(lms.login_initiation(ada, link=link))
        student.page.wait_for_url("**/courses/demo/labs/vector-scale")
        main = student.page.inner_text("main")
        assert "Scale a vector" in main
        assert "ada.browser@uni.example" in student.page.inner_text("header")
        assert student.page.locator("input[type=file]").count() == 1  # may upload at once
        student.shot("lti-launch-lab-desktop")
        assert student.outside == [] and teacher.outside == []
