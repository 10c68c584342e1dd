"""LTI in a real browser: an instructor registers an LMS on the course's LMS page, and a
student's launch from that LMS (a platform built on lti1p3platform, on loopback) lands on a
lab. The screenshots are the issue's: the registration page and the landing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.app.browser.conftest import Server
from tests.app.lti.platform import TestPlatform

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_an_lms_is_registered_and_a_launch_lands_on_a_lab(visitor: Any, server: Server) -> None:
    from app.lti.tool import forget_tokens

    forget_tokens()
    with TestPlatform(tool_base=server.base) as lms:
        teacher = visitor(width=1280, height=900)
        teacher.login(server.people.instructor)
        teacher.go("/courses/demo/lti")
        assert server.base + "/lti/launch" in teacher.page.inner_text("#tool-values")
        for name, value in lms.values().items():
            teacher.page.fill(f"#register [name={name}]", value)
        teacher.page.click("#register button[type=submit]")
        teacher.page.wait_for_selector("#message")
        assert "Registered Test LMS" in teacher.page.inner_text("#message")
        assert lms.issuer in teacher.page.inner_text("#platforms")
        teacher.shot("lti-registration-desktop")

        ada = lms.person("Ada Lovelace", "ada.browser@uni.example")
        course = lms.course("GPU Programming (Canvas)", ada)
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
