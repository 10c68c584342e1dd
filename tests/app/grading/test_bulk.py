"""A whole lab's regrade waits behind students' uploads: sent a few jobs at a time, only while
no normal job waits on the broker."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.grading.bulk import BACKGROUND_IN_FLIGHT, background_jobs_to_send, regrade_lab
from app.grading.sweeper import sweep
from app.submissions.models import GradingJob, JobState, Priority, Status
from tests.app.conftest import make_world
from tests.app.factories import make_submission


def test_background_jobs_go_out_only_while_no_upload_waits(session: Session) -> None:
    # Other tests leave normal jobs queued (no worker runs here); park them inside this
    # test's transaction, which is rolled back at the end.
    session.execute(
        update(GradingJob)
        .where(GradingJob.state == JobState.queued.value)
        .values(state=JobState.failed.value, error="parked by a test")
    )
    world = make_world(session)
    for _ in range(5):
        make_submission(session, user=world.student.user, lab=world.lab, score=3)
    result = regrade_lab(session, lab=world.lab, requested_by="a test", now=utcnow())
    assert result.queued == 5
    now = utcnow()
    first = background_jobs_to_send(session, now=now)
    # Two at a time, as the README says ("the workers' sweep sends two at a time").
    assert BACKGROUND_IN_FLIGHT == 2 and len(first) == 2
    # While those wait on the broker, no more go out.
    assert background_jobs_to_send(session, now=now) == []
    # A worker takes both; a student's upload arrives and waits: the regrade holds back.
    session.execute(
        update(GradingJob)
        .where(GradingJob.id.in_([job_id for _, job_id, _, _ in first]))
        .values(state=JobState.started.value)
    )
    upload, upload_job = make_submission(
        session, user=world.other_student.user, lab=world.lab, job_state=JobState.queued
    )
    assert background_jobs_to_send(session, now=now) == []
    upload_job.state = JobState.done.value
    session.flush()
    assert len(background_jobs_to_send(session, now=now)) == BACKGROUND_IN_FLIGHT
    session.rollback()


def test_the_sweep_does_not_send_held_back_jobs_as_unsent(session: Session) -> None:
    world = make_world(session)
    submission, _ = make_submission(session, user=world.student.user, lab=world.lab, score=3)
    long_ago = utcnow() - timedelta(hours=1)
    regrade_lab(session, lab=world.lab, requested_by="a test", now=long_ago)
    session.commit()
    job = session.scalars(
        select(GradingJob).where(
            GradingJob.submission_id == submission.id,
            GradingJob.priority == Priority.background.value,
        )
    ).one()
    report = sweep()
    assert job.id not in report.resent
    session.expire_all()
    assert session.get_one(GradingJob, job.id).state == JobState.queued.value
    assert submission.status == Status.queued.value


def test_a_regrade_says_which_were_graded_against_an_older_lab_version(session: Session) -> None:
    world = make_world(session)
    versions = ["0" * 64, "1" * 64, "", world.lab.digest]
    for digest in versions:
        _, job = make_submission(session, user=world.student.user, lab=world.lab, score=3)
        job.lab_digest = digest
    session.flush()
    result = regrade_lab(session, lab=world.lab, requested_by="a test", now=utcnow())
    assert (result.queued, result.older, result.unrecorded) == (4, 2, 1)
    assert result.digest == world.lab.digest
    assert result.versions() == (
        "Of these, 2 were last graded against an older version of the lab and 1 before lab "
        f"versions were recorded; the lab is now at version {world.lab.digest[:12]}."
    )
    session.rollback()
