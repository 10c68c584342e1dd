"""What an upload is told when it is too large or not a .cu file (issue 19, item 6)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.submissions.models import Submission
from tests.app.api.test_routes import submit
from tests.app.conftest import GOOD_KERNEL, World
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


async def test_an_upload_over_the_limit_is_told_its_real_size(
    client: httpx.AsyncClient, world: World
) -> None:
    limit = get_settings().max_upload_bytes
    body = b"/" * 300_000
    assert limit < len(body) < limit + 64 * 1024  # read by the app, not refused unread
    r = await submit(client, world, world.student, body=body)
    assert r.status_code == 413
    detail = r.json()["detail"]
    assert f"The file is 300000 bytes (293 KiB), over the limit of {limit} bytes" in detail
    assert str(limit + 1) not in detail


async def test_an_upload_refused_unread_names_its_size_and_the_web_gets_the_lab_page(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    limit = get_settings().max_upload_bytes
    huge = b"/" * (20 * 1024 * 1024)
    r = await submit(client, world, world.student, body=huge)
    assert r.status_code == 413
    detail = r.json()["detail"]
    # The whole body's declared size (the file and the form around it), and the file's limit.
    sent = int(r.request.headers["content-length"])
    assert sent > len(huge)
    assert f"The upload is {sent} bytes (20.0 MiB), over the limit of {limit} bytes (256 KiB)" in (
        detail
    )
    await login(client, world.student)
    lab_path = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    page = await client.get(lab_path)
    before = session.scalar(select(func.count()).select_from(Submission))
    r = await client.post(
        f"{lab_path}/submissions",
        data={"csrf_token": csrf_of(page.text)},
        files={"file": ("big.cu", huge, "text/plain")},
    )
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["connection"] == "close"
    # The lab page, signed in, with the sentence where the form is and the form to try again.
    error = r.text.split('id="error">', 1)[1].split("</p>", 1)[0]
    assert error.startswith(f"The upload is {int(r.request.headers['content-length'])} bytes")
    assert f"(20.0 MiB), over the limit of {limit} bytes (256 KiB)" in error
    assert f'action="{lab_path}/submissions"' in r.text
    assert world.student.email in r.text  # signed in, not the bare page of a stranger
    assert f'href="/courses/{world.course.slug}"' in r.text
    assert session.scalar(select(func.count()).select_from(Submission)) == before

    async def chunks():  # no Content-Length: refused part-read, by the bytes as they arrive
        token = csrf_of(page.text).encode()
        yield b'--b\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n' + token
        yield b'\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="k.cu"\r\n\r\n'
        for _ in range(64):
            yield b"x" * 65536

    r = await client.post(
        f"{lab_path}/submissions",
        headers={"content-type": "multipart/form-data; boundary=b"},
        content=chunks(),
    )
    assert r.status_code == 413
    assert 'id="error">The upload is larger than that, over the limit of' in r.text
    assert f'action="{lab_path}/submissions"' in r.text
    assert session.scalar(select(func.count()).select_from(Submission)) == before


async def test_two_file_parts_are_refused_with_a_sentence_by_the_api_and_the_form(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    def count() -> int:
        return session.scalar(select(func.count()).select_from(Submission)) or 0

    before = count()
    two = [
        ("file", ("first.cu", GOOD_KERNEL.encode(), "text/plain")),
        ("file", ("second.cu", GOOD_KERNEL.replace("scale", "scale", 1).encode(), "text/plain")),
    ]
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files=two,
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("The upload holds 2 files (form parts named 'file')")
    assert count() == before
    await login(client, world.student)
    lab_path = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    page = await client.get(lab_path)
    r = await client.post(
        f"{lab_path}/submissions", data={"csrf_token": csrf_of(page.text)}, files=two
    )
    assert r.status_code == 422
    assert 'id="error">The upload holds 2 files' in r.text
    assert count() == before
    # One part, as the form sends it, still goes in.
    r = await client.post(
        f"{lab_path}/submissions", data={"csrf_token": csrf_of(page.text)}, files=two[:1]
    )
    assert r.status_code == 303
    assert count() == before + 1


async def test_only_a_cu_file_is_taken(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    def count() -> int:
        return session.scalar(select(func.count()).select_from(Submission)) or 0

    before = count()
    for name in ("kernel.txt", "kernel.cuh", "kernel.cu.zip", "kernel"):
        r = await submit(client, world, world.student, filename=name)
        assert r.status_code == 422, (name, r.text)
        assert f"{name} is not a .cu file" in r.json()["detail"]
    assert count() == before
    r = await submit(client, world, world.student, filename="My_Kernel.CU")
    assert r.status_code == 202
    # A client that sends no file name at all still submits the source.
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code in (202, 422), r.text
