"""What follows a grading, in one place: when a job ends, with a verdict or without one, this
fans out to the features that act on it, in the grading's own transaction.

In order: a fully correct run on a GPU is profiled afterwards (app.profiling queues the job,
at a lower priority than any grading); what counts is recounted for everyone the submission
counts for (app.policy: late days are spent or given back, and the counted score may move);
then the LMS is told the counted score (app.lti), last, since the recount can change it. A
grading that failed on our side has no verdict: only the recount follows (what a late upload
held comes back; it may be graded again, and then charged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab
from app.lti.scores import note_grading
from app.policy.recount import recount
from app.profiling.service import queue_after_grading
from app.submissions.credits import credited_users
from app.submissions.models import GradingJob, Submission

if TYPE_CHECKING:
    from graders.results import GradeReport


def after_grading(
    session: Session,
    *,
    submission: Submission,
    job: GradingJob,
    report: GradeReport | None = None,
    verdict: bool = True,
) -> None:
    """A job ended: `report` is the run's (None for a compile error, or where `verdict` is
    False: the grader failed on our side). The caller commits."""
    if report is not None:
        queue_after_grading(session, submission=submission, job=job, report=report)
    session.flush()
    recount(
        session,
        lab=session.get_one(Lab, submission.lab_id),
        users=credited_users(session, submission_id=submission.id),
        now=utcnow(),
    )
    if verdict:
        note_grading(session, submission=submission)
