"""Hostile HTTP: each test tries one attack on the service and checks the defence holds."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.core.database import utcnow
from app.core.settings import get_settings
from app.courses.models import LatePolicy
from app.submissions.models import Status, Submission
from app.users.models import ApiToken
from app.users.service import create_api_token
from tests.app.conftest import GOOD_KERNEL, PASSWORD, Member, World, make_world
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio

XSS = '<script>alert("pwned")</script>'


def submit_url(world: World) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions"


def lab_url(world: World) -> str:
    return f"/courses/{world.course.slug}/labs/{world.lab.slug}"


async def api_submit(
    client: httpx.AsyncClient,
    world: World,
    member: Member,
    body: bytes = GOOD_KERNEL.encode(),
    filename: str = "scale.cu",
) -> httpx.Response:
    return await client.post(
        submit_url(world), headers=member.auth, files={"file": (filename, body, "text/plain")}
    )


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no CSRF token"
    return match.group(1)


async def login(client: httpx.AsyncClient, member: Member, password: str = PASSWORD) -> int:
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={"email": member.email, "password": password, "csrf_token": csrf_of(page.text)},
    )
    return r.status_code


# --- access control ----------------------------------------------------------------------


async def test_another_students_submission_by_id_is_not_found(
    client: httpx.AsyncClient, world: World
) -> None:
    sid = (await api_submit(client, world, world.student)).json()["id"]
    r = await client.get(f"/api/v1/submissions/{sid}", headers=world.other_student.auth)
    assert r.status_code == 404
    assert "that you may see" in r.json()["detail"]
    assert GOOD_KERNEL not in r.text
    # The page refuses the same way, and so does a neighbouring id nobody has.
    assert await login(client, world.other_student) == 303
    page = await client.get(f"/submissions/{sid}")
    assert page.status_code == 404
    assert "factor * src[i]" not in page.text
    assert (await client.get(f"/submissions/{sid + 10_000}")).status_code == 404


async def test_staff_endpoints_refuse_a_student(client: httpx.AsyncClient, world: World) -> None:
    slug = world.course.slug
    for path in (f"/api/v1/courses/{slug}/submissions", f"/api/v1/courses/{slug}/gradebook.csv"):
        r = await client.get(path, headers=world.student.auth)
        assert r.status_code == 403, path
        assert r.json()["detail"].endswith(".")
    assert await login(client, world.student) == 303
    for path in (f"/courses/{slug}/gradebook", f"{lab_url(world)}/submissions"):
        page = await client.get(path)
        assert page.status_code == 403, path


async def test_an_outsider_sees_nothing_of_a_course(
    client: httpx.AsyncClient, world: World
) -> None:
    sid = (await api_submit(client, world, world.student)).json()["id"]
    outsider = world.outsider.auth
    assert (await client.get(f"/api/v1/submissions/{sid}", headers=outsider)).status_code == 404
    labs = await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=outsider)
    assert labs.status_code == 403
    assert (await api_submit(client, world, world.outsider)).status_code == 403


async def test_missing_or_malformed_tokens_are_refused_with_a_sentence(
    client: httpx.AsyncClient, world: World
) -> None:
    url = f"/api/v1/courses/{world.course.slug}/labs"
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer kg_" + "A" * 43},
        {"Authorization": f"Bearer {world.student.token}x"},
    ):
        r = await client.get(url, headers=headers)
        assert r.status_code == 401, headers
        assert r.headers["www-authenticate"] == "Bearer"
        assert "token" in r.json()["detail"]


async def test_a_revoked_token_stops_working_at_once(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    url = f"/api/v1/courses/{world.course.slug}/labs"
    assert (await client.get(url, headers=world.student.auth)).status_code == 200
    r = await client.delete("/api/v1/tokens/current", headers=world.student.auth)
    assert r.status_code == 204
    after = await client.get(url, headers=world.student.auth)
    assert after.status_code == 401
    assert "revoked" in after.json()["detail"]
    assert (await api_submit(client, world, world.student)).status_code == 401
    # Revoking twice is refused, and the row keeps the time it was revoked.
    again = await client.delete("/api/v1/tokens/current", headers=world.student.auth)
    assert again.status_code == 401
    rows = session.scalars(select(ApiToken).where(ApiToken.user_id == world.student.user.id))
    assert all(row.revoked_at is not None for row in rows)


async def test_the_cli_revokes_a_users_tokens(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    second = create_api_token(session, user=world.ta.user, name="laptop")
    session.commit()
    runner = CliRunner()
    result = runner.invoke(cli, ["token", "revoke", world.ta.email, "--name", "laptop"])
    assert result.exit_code == 0, result.output
    assert "Revoked 1 token" in result.output
    url = f"/api/v1/courses/{world.course.slug}/labs"
    revoked = await client.get(url, headers={"Authorization": f"Bearer {second}"})
    assert revoked.status_code == 401
    assert (await client.get(url, headers=world.ta.auth)).status_code == 200  # other label
    result = runner.invoke(cli, ["token", "revoke", "--token", world.ta.token])
    assert result.exit_code == 0, result.output
    assert (await client.get(url, headers=world.ta.auth)).status_code == 401
    unknown = runner.invoke(cli, ["token", "revoke", "--token", world.ta.token])
    assert unknown.exit_code == 1
    assert "already revoked" in unknown.output


# --- uploads -----------------------------------------------------------------------------


async def test_an_oversize_upload_is_refused_with_413(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    limit = get_settings().max_upload_bytes
    body = b"// padding\n" * (limit // 11 + 10)
    r = await api_submit(client, world, world.student, body=body)
    assert r.status_code == 413
    assert f"limit of {limit} bytes" in r.json()["detail"]
    count = session.scalars(select(Submission).where(Submission.user_id == world.student.user.id))
    assert list(count) == []


async def test_binary_and_empty_uploads_are_refused_with_a_reason(
    client: httpx.AsyncClient, world: World
) -> None:
    for body, words in (
        (b"\xff\xfe\x00k\x00e\x00r\x00n\x00", "not UTF-8"),
        (b"int x;\x00", "NUL"),
        (b"", "empty"),
        (b"  \n\t\n", "empty"),
    ):
        r = await api_submit(client, world, world.student, body=body)
        assert r.status_code == 422, body
        assert words in r.json()["detail"]


async def test_a_filename_with_dot_dot_is_kept_as_a_name_and_never_a_path(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    data_dir = get_settings().data_dir.resolve()
    before = {p for p in data_dir.rglob("*")}
    for filename in ("../../../../etc/passwd.cu", "..\\..\\windows\\win.ini.cu", "/tmp/e.cu"):
        r = await api_submit(client, world, world.student, filename=filename)
        assert r.status_code == 202, r.text
        row = session.get_one(Submission, r.json()["id"])
        assert "/" not in row.filename and "\\" not in row.filename and ".." not in row.filename
    new_files = {p for p in data_dir.rglob("*")} - before
    assert not [p for p in new_files if p.suffix in (".cu", ".ini", "")], new_files


async def test_script_in_a_filename_is_escaped_on_every_page(
    client: httpx.AsyncClient, world: World
) -> None:
    name = '<img src=x onerror="alert(1)">.cu'
    sid = (await api_submit(client, world, world.student, filename=name)).json()["id"]
    assert await login(client, world.student) == 303
    for path in (lab_url(world), f"/submissions/{sid}"):
        page = await client.get(path)
        assert page.status_code == 200
        assert "<img src=x" not in page.text, path
        assert "&lt;img src=x onerror=" in page.text, path
    await client.post("/logout", data={"csrf_token": csrf_of(page.text)})
    assert await login(client, world.instructor) == 303
    staff_page = await client.get(f"{lab_url(world)}/submissions")
    assert "<img src=x" not in staff_page.text


async def test_script_in_a_compile_log_and_in_the_source_is_escaped(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    submission, _ = make_submission(
        session, user=world.student.user, lab=world.lab, status=Status.compile_error
    )
    submission.source_text = f"// {XSS}\n</pre></td></tr></table>{XSS}\n"
    submission.compile_ok = False
    submission.compile_reason = "compile_error"
    submission.compile_message = f"The compiler reported 1 error. {XSS}"
    submission.compile_log = f'scale.cu(2): error: identifier "{XSS}" is undefined\n  {XSS}\n'
    submission.status_message = XSS
    session.commit()
    assert await login(client, world.student) == 303
    page = await client.get(f"/submissions/{submission.id}")
    assert page.status_code == 200
    assert XSS not in page.text
    assert "</pre></td></tr></table>" not in page.text
    assert page.text.count("&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") >= 4
    api = await client.get(f"/api/v1/submissions/{submission.id}", headers=world.student.auth)
    assert api.headers["content-type"].startswith("application/json")


async def test_form_posts_without_the_csrf_token_are_refused(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    # Logging in without the token fails even with the right password.
    await client.get("/login")
    r = await client.post("/login", data={"email": world.student.email, "password": PASSWORD})
    assert r.status_code in (403, 422)
    assert await login(client, world.student) == 303
    for data in ({}, {"csrf_token": "forged-token"}):
        upload = await client.post(
            f"{lab_url(world)}/submissions",
            data=data,
            files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        )
        assert upload.status_code in (403, 422), data
    assert "did not come from this site" in upload.text or upload.status_code == 422
    rows = session.scalars(select(Submission).where(Submission.user_id == world.student.user.id))
    assert list(rows) == []
    # A cross-site logout needs the token too.
    assert (await client.post("/logout")).status_code in (403, 422)
    assert (await client.get(lab_url(world))).status_code == 200  # still logged in


# --- limits and deadlines ----------------------------------------------------------------


async def test_too_many_submissions_get_429_with_the_time_to_wait(
    client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "submission_rate_limit", 2)
    first = await api_submit(client, world, world.student)
    assert first.status_code == 202
    assert first.headers["x-ratelimit-limit"] == "2"
    assert first.headers["x-ratelimit-remaining"] == "1"
    second = await api_submit(client, world, world.student)
    assert second.headers["x-ratelimit-remaining"] == "0"
    third = await api_submit(client, world, world.student)
    assert third.status_code == 429
    wait = int(third.headers["retry-after"])
    assert 0 < wait <= get_settings().submission_rate_window_seconds
    assert "submit again in" in third.json()["detail"]
    # The limit is per user and per lab: another student is not affected, nor is staff.
    assert (await api_submit(client, world, world.other_student)).status_code == 202
    staff = await api_submit(client, world, world.instructor)
    assert staff.status_code == 202
    assert "x-ratelimit-remaining" not in staff.headers


async def test_the_remaining_quota_is_on_the_lab_page_and_in_the_api(
    client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "submission_rate_limit", 3)
    await api_submit(client, world, world.student)
    labs = await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
    assert labs.json()[0]["submissions_remaining"] == 2
    assert await login(client, world.student) == 303
    page = await client.get(lab_url(world))
    assert "You have 2 of 3 submissions left for this lab per hour." in page.text
    for _ in range(2):
        await api_submit(client, world, world.student)
    page = await client.get(lab_url(world))
    assert "You have 0 of 3 submissions left" in page.text
    refused = await client.post(
        f"{lab_url(world)}/submissions",
        data={"csrf_token": csrf_of(page.text)},
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert refused.status_code == 429
    assert "retry-after" in refused.headers


async def test_a_submission_after_the_due_date_is_refused_or_marked_late(
    client: httpx.AsyncClient, session: Session
) -> None:
    past = utcnow() - timedelta(minutes=1)
    refusing = make_world(session, due_at=past, late_policy=LatePolicy.refuse)
    r = await api_submit(client, refusing, refusing.student)
    assert r.status_code == 403
    assert "does not accept late submissions" in r.json()["detail"]
    accepting = make_world(session, due_at=past, late_policy=LatePolicy.accept)
    r = await api_submit(client, accepting, accepting.student)
    assert r.status_code == 202
    assert session.get_one(Submission, r.json()["id"]).late is True
    future = make_world(session, release_at=utcnow() + timedelta(days=1))
    assert (await api_submit(client, future, future.student)).status_code == 403


async def test_login_is_throttled_after_repeated_failures(
    client: httpx.AsyncClient, world: World
) -> None:
    allowed = get_settings().login_max_failures
    for _ in range(allowed):
        assert await login(client, world.student, password="wrong guess") == 401
    # Now even the right password waits, and the page says how long.
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={"email": world.student.email, "password": PASSWORD, "csrf_token": csrf_of(page.text)},
    )
    assert r.status_code == 429
    assert int(r.headers["retry-after"]) > 0
    assert "Too many failed logins" in r.text
    # Another account from elsewhere is unaffected.
    assert await login(client, world.other_student) == 303


# --- cookies and headers -----------------------------------------------------------------


async def test_session_cookie_is_httponly_samesite_and_secure_over_https(
    world: World,
) -> None:
    from app.main import create_app

    transport = httpx.ASGITransport(app=create_app())
    for base, secure in (("http://testserver", False), ("https://testserver", True)):
        async with httpx.AsyncClient(transport=transport, base_url=base) as c:
            r = await c.get("/login")
            cookie = r.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=lax" in cookie
            assert ("secure" in cookie) is secure, cookie
            if secure:
                assert r.headers["strict-transport-security"].startswith("max-age=")


async def test_pages_carry_protective_headers_and_login_never_redirects_off_site(
    client: httpx.AsyncClient, world: World
) -> None:
    page = await client.get("/login")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    for target in (
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "/\t/evil.example",
    ):
        form = await client.get("/login")
        r = await client.post(
            "/login",
            data={
                "email": world.student.email,
                "password": PASSWORD,
                "csrf_token": csrf_of(form.text),
                "next": target,
            },
        )
        assert r.status_code == 303
        # Browsers read a backslash (or a tab-split slash) as "//": that leaves the site too.
        assert r.headers["location"] == "/", target


async def test_odd_ids_and_paths_get_clear_4xx_not_errors(
    client: httpx.AsyncClient, world: World
) -> None:
    auth = world.student.auth
    for path in (
        "/api/v1/submissions/not-a-number",
        "/api/v1/submissions/99999999999999999999999",
        "/api/v1/submissions/-1",
        "/api/v1/courses/..%2F..%2Fetc%2Fpasswd/labs",
        f"/api/v1/courses/{world.course.slug}/labs/..%2F..%2Fetc%2Fpasswd/submissions",
    ):
        r = await client.get(path, headers=auth)
        assert 400 <= r.status_code < 500, (path, r.status_code)
        assert "root:" not in r.text
    # A multipart body without the file field, and a body that is not multipart at all.
    assert (await client.post(submit_url(world), headers=auth)).status_code == 422
    junk = await client.post(
        submit_url(world),
        headers={**auth, "Content-Type": "multipart/form-data; boundary=zzz"},
        content=b"--zzz\r\nnot a part\r\n",
    )
    assert 400 <= junk.status_code < 500


async def test_a_forged_session_cookie_logs_nobody_in(
    client: httpx.AsyncClient, world: World
) -> None:
    import base64
    import json

    forged = base64.b64encode(json.dumps({"user_id": world.instructor.user.id}).encode())
    client.cookies.set("kernelgrader_session", forged.decode() + ".unsigned.forged")
    r = await client.get(f"/courses/{world.course.slug}/gradebook")
    assert r.status_code == 303
    assert r.headers["location"].startswith("/login")


async def test_a_csrf_token_from_another_session_is_refused(world: World) -> None:
    from app.main import create_app

    transport = httpx.ASGITransport(app=create_app())
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as attacker,
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as victim,
    ):
        stolen = csrf_of((await attacker.get("/login")).text)
        assert await login(victim, world.student) == 303
        r = await victim.post(
            f"{lab_url(world)}/submissions",
            data={"csrf_token": stolen},
            files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        )
        assert r.status_code == 403


async def test_the_api_takes_the_login_cookie_for_reads_only(
    client: httpx.AsyncClient, world: World
) -> None:
    # A page on another site can make the browser post with the cookie; the API ignores it.
    assert await login(client, world.student) == 303
    labs = await client.get(f"/api/v1/courses/{world.course.slug}/labs")
    assert labs.status_code == 200
    r = await client.post(
        submit_url(world), files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")}
    )
    assert r.status_code == 401
    assert (await client.delete("/api/v1/tokens/current")).status_code == 401


async def test_a_huge_body_is_refused_before_it_is_read_even_when_streamed(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    huge = b"x" * (8 * 1024 * 1024)
    r = await api_submit(client, world, world.student, body=huge)
    assert r.status_code == 413

    async def chunks():  # no Content-Length: the server must count as it reads
        yield (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.cu"\r\n'
            b"Content-Type: text/plain\r\n\r\n"
        )
        for _ in range(64):  # a file part that never ends
            yield b"y" * (128 * 1024)

    streamed = await client.post(
        submit_url(world),
        headers={**world.student.auth, "Content-Type": "multipart/form-data; boundary=b"},
        content=chunks(),
    )
    assert streamed.status_code == 413
    rows = session.scalars(select(Submission).where(Submission.user_id == world.student.user.id))
    assert list(rows) == []


async def test_guessing_across_many_accounts_from_one_address_is_throttled_too(
    client: httpx.AsyncClient, world: World
) -> None:
    # An address may fail five times as often as one account; spraying one password over
    # that many made-up accounts uses up the address.
    for i in range(get_settings().login_max_failures * 5):
        page = await client.get("/login")
        r = await client.post(
            "/login",
            data={
                "email": f"nobody{i}@example.edu",
                "password": "Summer2026!",
                "csrf_token": csrf_of(page.text),
            },
        )
        assert r.status_code == 401, i
    assert await login(client, world.student) == 429


async def test_malformed_requests_get_a_sentence_not_a_validation_dump(
    client: httpx.AsyncClient, world: World
) -> None:
    # The API: a form without its file field, an unknown path, a wrong method.
    missing = await client.post(submit_url(world), headers=world.student.auth)
    assert missing.status_code == 422
    detail = missing.json()["detail"]
    assert isinstance(detail, str) and "'file'" in detail and detail.endswith(".")
    unknown = await client.get("/api/v1/no-such-thing", headers=world.student.auth)
    assert unknown.status_code == 404
    assert "/api/v1/no-such-thing" in unknown.json()["detail"]
    wrong = await client.put("/api/v1/health")
    assert wrong.status_code == 405 and "PUT" in wrong.json()["detail"]
    assert "GET" in wrong.headers["allow"]
    # A page: the upload form posted without a file answers with a page, not JSON.
    await login(client, world.student)
    page = await client.get(lab_url(world))
    r = await client.post(lab_url(world) + "/submissions", data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/html")
    assert "&#39;file&#39; is missing" in r.text and '"loc"' not in r.text
    nowhere = await client.get("/no/such/page")
    assert nowhere.status_code == 404 and nowhere.headers["content-type"].startswith("text/html")


async def test_rotating_ipv6_addresses_within_one_network_does_not_escape_the_throttle(
    world: World,
) -> None:
    from app.main import create_app

    # Any IPv6 host holds a whole /64, so every guess can come from a fresh address in it.
    app = create_app()
    for i in range(get_settings().login_max_failures * 5):
        transport = httpx.ASGITransport(app=app, client=(f"2001:db8:1:2::{i + 1:x}", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            page = await c.get("/login")
            r = await c.post(
                "/login",
                data={
                    "email": f"nobody{i}@example.edu",
                    "password": "Summer2026!",
                    "csrf_token": csrf_of(page.text),
                },
            )
            assert r.status_code == 401, i
    transport = httpx.ASGITransport(app=app, client=("2001:db8:1:2::ffff", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        assert await login(c, world.other_student, password="Summer2026!") == 429
    # Another network is not held back.
    transport = httpx.ASGITransport(app=app, client=("2001:db8:9:9::1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        assert await login(c, world.other_student) == 303


async def test_an_unexpected_failure_is_a_sentence_not_a_traceback(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.gradebook import pages as gradebook_pages
    from app.main import create_app
    from app.submissions import api as submissions_api

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(submissions_api, "labs_of", broken)
    monkeypatch.setattr(gradebook_pages, "labs_of", broken)
    transport = httpx.ASGITransport(app=create_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        r = await c.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
        assert r.status_code == 500
        assert "on our side" in r.json()["detail"] and "secret" not in r.text
        await login(c, world.student)
        page = await c.get(f"/courses/{world.course.slug}")
        assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
        assert "on our side" in page.text and "secret" not in page.text


async def test_the_api_documents_its_errors_as_they_are_sent(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    error = schema["components"]["schemas"]["HTTPValidationError"]
    assert error["properties"]["detail"]["type"] == "string"


async def test_a_ta_of_one_course_can_do_nothing_in_another(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    elsewhere = make_world(session)
    theirs, _ = make_submission(session, user=elsewhere.student.user, lab=elsewhere.lab)
    session.commit()
    ta, slug = world.ta, elsewhere.course.slug
    for method, path in (
        ("GET", f"/api/v1/submissions/{theirs.id}"),
        ("POST", f"/api/v1/submissions/{theirs.id}/regrade"),
        ("GET", f"/api/v1/courses/{slug}/submissions"),
        ("GET", f"/api/v1/courses/{slug}/gradebook.csv"),
        ("GET", f"/api/v1/courses/{slug}/labs"),
    ):
        r = await client.request(method, path, headers=ta.auth)
        assert r.status_code in (403, 404), (path, r.status_code)
        assert elsewhere.student.email not in r.text
    await login(client, ta)
    for path in (
        f"/submissions/{theirs.id}",
        f"/courses/{slug}/gradebook",
        f"/courses/{slug}/labs/{elsewhere.lab.slug}/submissions",
    ):
        r = await client.get(path)
        assert r.status_code in (403, 404), (path, r.status_code)
        assert elsewhere.student.email not in r.text
    page = await client.get(f"/submissions/{theirs.id}")
    r = await client.post(
        f"/submissions/{theirs.id}/regrade", data={"csrf_token": csrf_of(page.text)}
    )
    assert r.status_code == 404
    assert session.get_one(Submission, theirs.id).status == Status.graded.value


async def test_a_nul_byte_in_a_path_query_or_form_is_a_4xx_on_every_database(
    client: httpx.AsyncClient, world: World
) -> None:
    # PostgreSQL refuses NUL in text outright (SQLite stores it); run with
    # KERNELGRADER_TEST_DATABASE_URL=postgresql+psycopg://... to try it there.
    slug = world.course.slug
    for path in (
        "/api/v1/courses/a%00b/labs",
        f"/api/v1/courses/{slug}/labs/x%00y/submissions",
        f"/api/v1/courses/{slug}/submissions?user=ada%00@uni.edu",
    ):
        r = await client.get(path, headers=world.ta.auth)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
        assert isinstance(r.json()["detail"], str)
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={"email": "ada\x00@uni.edu", "password": "x", "csrf_token": csrf_of(page.text)},
    )
    assert 400 <= r.status_code < 500


async def test_parallel_submissions_cannot_pass_the_last_free_slot_together(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from app.core.database import session_scope
    from app.core.errors import RateLimited
    from app.courses.models import Course, Lab
    from app.submissions import service
    from app.users.models import User

    monkeypatch.setattr(get_settings(), "submission_rate_limit", 1)
    real_enforce = service.enforce_submission_quota
    second: list[str] = []

    def other_request() -> None:
        # The same student's second request of a burst, arriving just after this one counted.
        try:
            with session_scope() as other:
                service.create_submission(
                    other,
                    user=other.get_one(User, world.student.user.id),
                    course=other.get_one(Course, world.course.id),
                    lab=other.get_one(Lab, world.lab.id),
                    filename="k.cu",
                    data=GOOD_KERNEL.encode(),
                    now=utcnow(),
                )
            second.append("stored")
        except RateLimited:
            second.append("refused")

    def count_then_race(*args: object, **kwargs: object) -> object:
        quota = real_enforce(*args, **kwargs)  # type: ignore[arg-type]
        if not threads:
            thread = threading.Thread(target=other_request)
            threads.append(thread)
            thread.start()
            thread.join(timeout=1.0)
        return quota

    threads: list[threading.Thread] = []
    monkeypatch.setattr(service, "enforce_submission_quota", count_then_race)
    first = await api_submit(client, world, world.student)
    for thread in threads:
        thread.join()
    stored = session.scalars(select(Submission).where(Submission.user_id == world.student.user.id))
    assert len(list(stored)) == 1, (first.status_code, second)
    assert first.status_code == 202 and second == ["refused"]
