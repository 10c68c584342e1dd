"""The submission rate limit at its edges: the last one allowed, the first refused, a submission
exactly a window old, staff, and every sentence and header whole.

Written against the survivors of scripts/mutation.py (app/submissions/quota.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from app.core.errors import RateLimited
from app.core.settings import get_settings
from app.courses.service import add_lab
from app.submissions.quota import Quota, _duration, enforce_submission_quota, submission_quota
from app.teams.models import SubmissionCredit
from tests.app.conftest import World
from tests.app.factories import make_submission

NOW = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def limit_three_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(get_settings(), "submission_rate_limit", 3)
    monkeypatch.setattr(get_settings(), "submission_rate_window_seconds", 3600)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (1, "second"),
        (59, "59 seconds"),
        (60, "minute"),
        (61, "2 minutes"),
        (3599, "60 minutes"),
        (3600, "hour"),
        (5400, "90 minutes"),
        (7200, "2 hours"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: int, words: str) -> None:
    assert _duration(seconds) == words


def test_an_unlimited_quota_says_nothing() -> None:
    free = Quota(limit=None, used=40, window_seconds=3600, reset_at=None)
    assert free.remaining is None and free.headers(NOW) == {} and free.sentence(NOW) == ""
    assert free.seconds_to_reset(NOW) == 0


def test_the_reset_is_whole_seconds_rounded_up_and_at_least_one() -> None:
    def reset_in(delta: timedelta) -> int:
        return Quota(3, 3, 3600, NOW + delta).seconds_to_reset(NOW)

    assert reset_in(timedelta(seconds=59, milliseconds=100)) == 60
    assert reset_in(timedelta(seconds=60)) == 60
    assert reset_in(timedelta(milliseconds=200)) == 1
    assert reset_in(timedelta(seconds=-5)) == 1


def test_headers_and_sentences_whole() -> None:
    some = Quota(limit=3, used=1, window_seconds=3600, reset_at=NOW + timedelta(minutes=30))
    assert some.headers(NOW) == {
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "2",
        "X-RateLimit-Reset": "1800",
    }
    assert some.sentence(NOW) == "You have 2 of 3 submissions left for this lab per hour."
    spent = Quota(limit=3, used=4, window_seconds=3600, reset_at=NOW + timedelta(minutes=5))
    assert spent.remaining == 0
    assert spent.sentence(NOW) == (
        "You have 0 of 3 submissions left for this lab per hour; the next one is possible in "
        "5 minutes."
    )


@pytest.mark.usefixtures("limit_three_an_hour")
def test_the_window_counts_this_students_submissions_to_this_lab_only(
    session: Session, world: World
) -> None:
    student, lab = world.student.user, world.lab
    # Exactly one window old: it has left the window. A microsecond younger: counted.
    make_submission(session, user=student, lab=lab, created_at=NOW - timedelta(hours=1))
    oldest = NOW - timedelta(hours=1) + timedelta(microseconds=1)
    make_submission(session, user=student, lab=lab, created_at=oldest)
    make_submission(session, user=world.other_student.user, lab=lab, created_at=NOW)
    session.flush()
    quota = submission_quota(session, user=student, lab=lab, now=NOW)
    assert (quota.limit, quota.used, quota.remaining) == (3, 1, 2)
    assert quota.reset_at == oldest + timedelta(hours=1)
    nobody = submission_quota(session, user=world.other_student.user, lab=lab, now=NOW)
    assert nobody.used == 1 and nobody.reset_at == NOW + timedelta(hours=1)
    # Another lab's submissions count against that lab only.
    other_lab = add_lab(session, course=world.course, ref="hadamard")
    make_submission(session, user=student, lab=other_lab, created_at=NOW)
    session.flush()
    assert submission_quota(session, user=student, lab=lab, now=NOW).used == 1
    fresh = submission_quota(session, user=world.ta.user, lab=other_lab, now=NOW)
    assert fresh.limit is None


@pytest.mark.usefixtures("limit_three_an_hour")
def test_a_student_with_no_submission_has_the_whole_quota(session: Session, world: World) -> None:
    quota = submission_quota(session, user=world.student.user, lab=world.lab, now=NOW)
    assert quota == Quota(limit=3, used=0, window_seconds=3600, reset_at=None)
    assert quota.headers(NOW) == {
        "X-RateLimit-Limit": "3",
        "X-RateLimit-Remaining": "3",
        "X-RateLimit-Reset": "0",
    }


@pytest.mark.usefixtures("limit_three_an_hour")
def test_the_last_allowed_submission_passes_and_the_next_is_refused(
    session: Session, world: World
) -> None:
    student, lab = world.student.user, world.lab
    first = NOW - timedelta(minutes=50)
    for minutes in (50, 20):
        make_submission(session, user=student, lab=lab, created_at=NOW - timedelta(minutes=minutes))
    session.flush()
    before = enforce_submission_quota(session, user=student, lab=lab, now=NOW)
    assert before.remaining == 1
    make_submission(session, user=student, lab=lab, created_at=NOW)
    session.flush()
    with pytest.raises(RateLimited) as refused:
        enforce_submission_quota(session, user=student, lab=lab, now=NOW)
    assert refused.value.retry_after == 600  # the first leaves the window at 12:10
    assert first + timedelta(hours=1) == NOW + timedelta(minutes=10)
    assert str(refused.value) == (
        f"You have made 3 submissions to {lab.slug} in the last hour, the most allowed; "
        "submit again in 10 minutes. Test locally in the meantime."
    )


@pytest.mark.usefixtures("limit_three_an_hour")
def test_staff_and_a_limit_of_zero_are_unlimited(
    session: Session, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(4):
        make_submission(session, user=world.ta.user, lab=world.lab, created_at=NOW)
    session.flush()
    staff = enforce_submission_quota(session, user=world.ta.user, lab=world.lab, now=NOW)
    assert staff == Quota(limit=None, used=0, window_seconds=3600, reset_at=None)
    monkeypatch.setattr(get_settings(), "submission_rate_limit", 0)
    student = submission_quota(session, user=world.student.user, lab=world.lab, now=NOW)
    assert student.limit is None
    monkeypatch.setattr(get_settings(), "submission_rate_limit", 1)
    assert submission_quota(session, user=world.student.user, lab=world.lab, now=NOW).limit == 1


@pytest.mark.usefixtures("limit_three_an_hour")
def test_a_teammates_submission_credited_to_the_student_counts_in_its_window_and_lab(
    session: Session, world: World
) -> None:
    student, mate, lab = world.student.user, world.other_student.user, world.lab
    other_lab = add_lab(session, course=world.course, ref="hadamard")
    since = NOW - timedelta(hours=1)

    def credited(to: int, *, on: object = lab, at: datetime = NOW) -> None:
        sub = make_submission(session, user=mate, lab=on, created_at=at)[0]  # type: ignore[arg-type]
        session.flush()
        session.add(SubmissionCredit(submission_id=sub.id, user_id=to))

    credited(student.id, at=NOW - timedelta(minutes=10))  # counts
    credited(world.outsider.user.id)  # another member's credit
    credited(student.id, on=other_lab)  # another lab
    credited(student.id, at=since)  # exactly a window old
    session.flush()
    quota = submission_quota(session, user=student, lab=lab, now=NOW)
    assert (quota.used, quota.reset_at) == (1, NOW + timedelta(minutes=50))
