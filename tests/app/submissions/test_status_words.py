"""Every status a submission can be in, worded as the README words it, on the page too."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.orm import Session

from app.submissions.models import Status
from app.submissions.status_words import status_tone, status_word
from tests.app.conftest import World
from tests.app.factories import make_submission
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio

# (word, tone) of each status; the README's "Statuses" paragraph names the same words.
WORDED = {
    "queued": ("Queued", "busy"),
    "compiling": ("Compiling", "busy"),
    "compile_error": ("Compile error", "failed"),
    "compiled": ("Compiled, waiting for a GPU", "waiting"),
    "running": ("Running the test cases", "busy"),
    "timing": ("Verdicts in; timing", "busy"),
    "sanitizer": ("Verdicts in; checking with the sanitizer", "busy"),
    "graded": ("Graded", "done"),
    "error": ("Failed on our side", "failed"),
}


def test_every_status_has_its_own_word_and_tone() -> None:
    assert {s.value for s in Status} == set(WORDED)
    for status in Status:
        assert (status_word(status), status_tone(status)) == WORDED[status.value], status
        assert status_word(status.value) == WORDED[status.value][0]


async def test_the_submission_page_words_each_status(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    made = {
        status: make_submission(session, user=world.student.user, lab=world.lab, status=status)[0]
        for status in Status
    }
    session.commit()
    await login(client, world.student)
    for status, submission in made.items():
        page = (await client.get(f"/submissions/{submission.id}")).text
        word = WORDED[status.value][0]
        assert f'data-status="{status.value}">{word}</span>' in page, status
