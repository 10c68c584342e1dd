"""One lease for every background job: a claim wins once, a silent holder loses its job while
attempts remain, a takeover leaves the old holder nothing to hold, and the sweep takes back a
job whose holder went silent (a grading's heartbeat; a similarity report's start)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.service import add_lab
from app.similarity.models import REPORTS, ReportState, SimilarityReport
from app.submissions.models import GRADING, JobState
from tests.app.conftest import make_world
from tests.app.factories import make_submission

SILENT = timedelta(seconds=30)


def test_a_claim_wins_once_and_a_silent_holder_loses_the_job_while_attempts_remain(
    session: Session,
) -> None:
    world = make_world(session)
    _, job = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.queued
    )
    session.commit()
    now = utcnow()

    def claim(me: str, at: datetime) -> bool:
        won = GRADING.claim(
            session, job.id, now=at, me=me, stale_before=at - SILENT, max_attempts=2
        )
        session.commit()
        return won

    assert claim("a:1", now)
    assert not claim("b:2", now)  # a beats: its job stays its own
    later = now + 2 * SILENT
    assert claim("b:2", later)  # a went silent: b takes it, its second attempt
    assert not GRADING.hold(session, job.id, "a:1")  # a finds it lost, and records nothing
    assert GRADING.hold(session, job.id, "b:2")
    session.commit()
    much_later = later + 10 * SILENT
    assert not claim("c:3", much_later)  # silent again, but its attempts are spent
    session.refresh(job)
    assert (job.state, job.worker_id, job.attempt) == (JobState.started.value, "b:2", 2)


def test_a_worker_retakes_its_own_job_only_when_asked_to(session: Session) -> None:
    world = make_world(session)
    _, job = make_submission(
        session, user=world.student.user, lab=world.lab, job_state=JobState.queued
    )
    now = utcnow()
    assert GRADING.claim(session, job.id, now=now, me="a:1", max_attempts=3)
    assert not GRADING.claim(session, job.id, now=now, me="a:1", max_attempts=3)
    assert GRADING.claim(session, job.id, now=now, me="a:1", max_attempts=3, retake_own=True)
    assert not GRADING.claim(session, job.id, now=now, me="b:2", max_attempts=3, retake_own=True)
    session.commit()
    session.refresh(job)
    assert job.attempt == 2


def test_the_sweep_takes_back_a_report_that_started_too_long_ago(session: Session) -> None:
    world = make_world(session)
    lab = add_lab(session, course=world.course, ref="vector-scale")
    report = SimilarityReport(lab_id=lab.id)
    fresh = SimilarityReport(lab_id=lab.id)
    session.add_all([report, fresh])
    session.flush()
    started = utcnow() - timedelta(hours=2)
    assert REPORTS.claim(session, report.id, now=started)
    assert not REPORTS.claim(session, report.id, now=started)  # running: no second worker
    assert REPORTS.claim(session, fresh.id, now=utcnow())

    def take_back() -> list[int]:
        return REPORTS.take_back_stale(
            session,
            stale_before=utcnow() - timedelta(hours=1),
            max_attempts=2,
            failed=lambda r: {"error": f"stopped {r.attempt} times"},
            queued={},
        )

    assert take_back() == [report.id]  # not the one that started a moment ago
    session.commit()
    session.refresh(report)
    assert (report.state, report.sent_at) == (ReportState.queued.value, None)
    assert REPORTS.claim(session, report.id, now=started)  # its second attempt, long ago too
    assert take_back() == [report.id]
    session.commit()
    session.refresh(report)
    assert (report.state, report.error) == (ReportState.failed.value, "stopped 2 times")
