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


async def test_an_upload_refused_unread_names_the_file_limit_and_the_web_gets_a_page(
    client: httpx.AsyncClient, world: World
) -> None:
    limit = get_settings().max_upload_bytes
    huge = b"/" * (2 * 1024 * 1024)
    r = await submit(client, world, world.student, body=huge)
    assert r.status_code == 413
    assert f"larger than the limit of {limit} bytes (256 KiB)" in r.json()["detail"]
    await login(client, world.student)
    page = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")
    r = await client.post(
        f"/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        data={"csrf_token": csrf_of(page.text)},
        files={"file": ("big.cu", huge, "text/plain")},
    )
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("text/html")
    assert "larger than the limit" in r.text and "<html" in r.text


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
